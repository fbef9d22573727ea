"""The review page in a real browser: Debian's chromium, headless, driven by Selenium through
Debian's chromium-driver. Real verdicts of the shipped examples (``veredito run --to sqlite``),
plus one answer that tries to run script.

Screenshots go to the test's temporary folder; with ``UPDATE_SCREENSHOTS=1`` they also
replace the ones ``docs/review.md`` shows.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import IN_CI, ROOT
from tests.test_review import hostile_verdict, reading
from veredito.store import open_store

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
DOCS = ROOT / "docs" / "img"


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    if not (CHROMIUM.exists() and CHROMEDRIVER.exists()):
        message = "Debian's chromium and chromium-driver are not installed"
        if IN_CI:
            pytest.fail(message)
        pytest.skip(message)
    webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in (
        "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
        "--disable-quic", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--window-size=1280,900",
        f"--user-data-dir={tmp_path_factory.mktemp('chromium')}",
    ):  # fmt: skip
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    folder = tmp_path_factory.mktemp("site")
    url = f"sqlite:///{folder / 'verdicts.db'}"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VEREDITO_", "OPENAI_"))}
    done = subprocess.run(
        [sys.executable, "-m", "veredito", "run", str(ROOT / "examples" / "triples.jsonl"),
         "--to", url, "--no-progress"],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    store = open_store(url)
    store.write([hostile_verdict().model_dump_json().encode()])
    store.close()
    with reading(url) as base:
        yield base


def shot(driver: Any, tmp_path: Path, name: str) -> None:
    path = tmp_path / f"{name}.png"
    assert driver.save_screenshot(str(path))
    assert path.stat().st_size > 10_000  # a rendered page, not a blank one
    if os.environ.get("UPDATE_SCREENSHOTS") == "1":
        DOCS.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, DOCS / path.name)


def wait(driver: Any, condition: Any, what: str) -> Any:
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.support.ui import WebDriverWait

    try:
        return WebDriverWait(driver, 15).until(condition)
    except TimeoutException:
        raise AssertionError(f"timed out waiting for {what}") from None


def test_list_filter_open_and_read_an_answer(browser: Any, site: str, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    browser.set_window_size(1280, 900)
    browser.get(site + "/?period=")
    rows = browser.find_elements(By.CSS_SELECTOR, "table.list tbody tr")
    assert len(rows) == 27  # the 26 examples and the hostile answer
    assert browser.find_element(By.ID, "n-answers").text == "27"
    # every form control has a label a screen reader announces
    unlabelled = browser.execute_script(
        "return [...document.querySelectorAll('form input, form select')]"
        ".filter(e => !e.labels || e.labels.length === 0).map(e => e.name)"
    )
    assert unlabelled == []
    shot(browser, tmp_path, "review-list")

    Select(browser.find_element(By.ID, "f-category")).select_by_value("PRAZO_VALOR")
    browser.find_element(By.ID, "f-only").click()
    browser.find_element(By.CSS_SELECTOR, "form.filters button").click()
    wait(browser, lambda d: "category=PRAZO_VALOR" in d.current_url, "the filtered list")
    rows = browser.find_elements(By.CSS_SELECTOR, "table.list tbody tr")
    assert len(rows) == 6  # the examples' six PRAZO_VALOR answers (make run's summary)
    for row in rows:
        assert "Prazo ou valor" in row.text
    assert Select(browser.find_element(By.ID, "f-category")).first_selected_option.text == (
        "Prazo ou valor"
    )

    browser.get(site + "/verdicts/ex-002")
    contradicted = browser.find_elements(By.CSS_SELECTOR, "#answer .claim.v-contradicted")
    assert [c.text for c in contradicted] == [
        "Você tem 30 dias para desistir da compra online, conforme o art. 49 do CDC"
    ]
    assert "contradiz o contexto, Prazo ou valor" in browser.find_element(By.ID, "l1").text
    findings = browser.find_element(By.CSS_SELECTOR, "table.findings").text
    assert "30 dias" in findings and "conflita com o contexto" in findings

    browser.get(site + "/verdicts/ex-001")  # grounded claims, each with the chunk it cites
    grounded = browser.find_elements(By.CSS_SELECTOR, "#answer .claim.v-grounded")
    assert len(grounded) == 3
    cited = browser.find_element(By.CSS_SELECTOR, "#c2 .cited")
    assert "Trecho 1 do contexto" in cited.text
    marked = {m.text.lower() for m in cited.find_elements(By.TAG_NAME, "mark")}
    assert {"49", "dias", "recebimento", "produto"} <= marked
    browser.set_window_size(1280, 1400)  # the claims and their chunks in one picture
    shot(browser, tmp_path, "review-verdict")


def test_keyboard_alone_reaches_an_answer(browser: Any, site: str) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    browser.set_window_size(1280, 900)
    browser.get(site + "/?period=")
    body = browser.find_element(By.TAG_NAME, "body")
    body.send_keys(Keys.TAB)
    for _ in range(40):
        active = browser.switch_to.active_element
        if "open" in (active.get_attribute("class") or ""):
            break
        active.send_keys(Keys.TAB)
    else:
        raise AssertionError("Tab never reached an answer's link")
    target = active.get_attribute("href")
    active.send_keys(Keys.ENTER)
    wait(browser, lambda d: d.current_url == target, "the answer's page")
    assert browser.find_element(By.TAG_NAME, "h1").text.startswith("Resposta")


def test_a_hostile_answer_runs_nothing(browser: Any, site: str, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    browser.set_window_size(1280, 900)
    for path in ("/?period=", "/verdicts/hostil-1"):
        browser.get(site + path)
        assert browser.execute_script("return typeof window.__pwned") == "undefined"
        assert browser.find_elements(By.CSS_SELECTOR, "main script, main img") == []
    answer = browser.find_element(By.ID, "answer").text
    # shown as the text it is (the claim's label sits after its last word)
    assert '<script>window.__pwned = 1</script>"><img src=x onerror="window.__pwned=2' in answer
    assert browser.find_element(By.CSS_SELECTOR, ".facts").text.count("sac-bot<b>") == 1
    shot(browser, tmp_path, "review-hostile")


def test_readable_on_a_phone(browser: Any, site: str, tmp_path: Path) -> None:
    browser.set_window_size(390, 844)
    for path in ("/?period=", "/verdicts/ex-003"):
        browser.get(site + path)
        overflow = browser.execute_script(
            "return document.documentElement.scrollWidth - document.documentElement.clientWidth"
        )
        assert overflow <= 0, f"{path} scrolls sideways by {overflow}px on a phone"
    shot(browser, tmp_path, "review-phone")
