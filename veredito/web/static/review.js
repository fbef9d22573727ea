/* veredito review page: keyboard shortcuts of the answer page's labelling form.
   The page works without this file (plain HTML forms); it only saves keystrokes.
   j / k   next / previous claim        c   the current claim is right (certa)
   e       it is wrong (errada): focus goes to the verdict to put instead
   Esc     leave a list or a text box, back to the current claim
   s       save                          n   save and go to the next answer
   Letters typed into a text box or a list are left alone. */
(function () {
  "use strict";
  var form = document.getElementById("rotular");
  if (!form) {
    return;
  }
  var groups = Array.prototype.slice.call(form.querySelectorAll("fieldset.judge"));
  var current = -1;

  function typing(element) {
    if (!element) {
      return false;
    }
    if (element.isContentEditable) {
      return true;
    }
    var tag = element.tagName;
    if (tag === "TEXTAREA" || tag === "SELECT") {
      return true;
    }
    return tag === "INPUT" && ["radio", "checkbox", "submit", "button"].indexOf(element.type) < 0;
  }

  function groupOf(element) {
    for (var i = 0; i < groups.length; i += 1) {
      if (groups[i].contains(element)) {
        return i;
      }
    }
    return -1;
  }

  function radioOf(group) {
    return group.querySelector("input[type=radio]:checked") || group.querySelector("input[type=radio]");
  }

  function focusClaim(index) {
    if (groups.length === 0) {
      return;
    }
    current = Math.max(0, Math.min(groups.length - 1, index));
    radioOf(groups[current]).focus();
    groups[current].scrollIntoView({ block: "center" });
  }

  function choose(value) {
    if (current < 0) {
      focusClaim(0);
    }
    if (current < 0) {
      return;
    }
    var radio = groups[current].querySelector("input[type=radio][value=" + value + "]");
    radio.checked = true;
    radio.focus();
    if (value === "errada") {
      groups[current].querySelector("select").focus();
    }
  }

  function save(id) {
    var button = document.getElementById(id);
    if (typeof form.requestSubmit === "function") {
      form.requestSubmit(button);
    } else {
      button.click();
    }
  }

  document.addEventListener("focusin", function (event) {
    var index = groupOf(event.target);
    if (index >= 0) {
      current = index;
    }
  });

  document.addEventListener("keydown", function (event) {
    if (event.defaultPrevented || event.ctrlKey || event.metaKey || event.altKey) {
      return;
    }
    if (event.key === "Escape" && typing(event.target) && form.contains(event.target)) {
      var index = groupOf(event.target);
      if (index >= 0) {
        focusClaim(index);
        event.preventDefault();
      } else {
        event.target.blur();
      }
      return;
    }
    if (typing(event.target)) {
      return;
    }
    var actions = {
      j: function () { focusClaim(current + 1); },
      k: function () { focusClaim(current - 1); },
      c: function () { choose("certa"); },
      e: function () { choose("errada"); },
      s: function () { save("salvar"); },
      n: function () { save("salvar-proxima"); }
    };
    if (Object.prototype.hasOwnProperty.call(actions, event.key)) {
      event.preventDefault();
      actions[event.key]();
    }
  });
}());
