"""The review page in a real browser: Debian's chromium, headless, driven by Selenium through
Debian's chromium-driver. Real verdicts of the shipped examples (``veredito run --to sqlite``),
plus one answer that tries to run script; and a reviewer who signs in and labels an answer with
the keyboard alone.

Screenshots go to the test's temporary folder; with ``UPDATE_SCREENSHOTS=1`` they also
replace the ones ``docs/review.md`` shows.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.conftest import IN_CI, ROOT
from tests.test_review import hostile_verdict, reading
from tests.test_serve import call
from veredito.store import open_store
from veredito.worker.verdict import Claim, JudgeInfo, TripleInput, Verdict

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


# -- a reviewer labels with the keyboard ----------------------------------------------------------
READ = "leitura-navegador-3b8d1f6a2c"
ANA, BIA = "rev-ana-navegador-8Kd3mQ7x", "rev-bia-navegador-2Pw9vL4c"
CDC = (
    "O art. 49 do Código de Defesa do Consumidor garante o direito de desistir da compra feita "
    "fora do estabelecimento comercial no prazo de 7 dias, contados do recebimento do produto."
)


def answer_to_review(n: int) -> Verdict:
    """An answer the judge passed whole, though its first claim counts the days from the wrong
    date: the reviewer's correction is "contradicts the context, Prazo ou valor"."""
    claims = [
        f"O prazo de 7 dias é contado da data da compra{' online' * (n % 2)}.",
        "A desistência vale para compras feitas fora da loja, como pela internet.",
        "Os valores pagos são devolvidos de imediato e com correção monetária.",
    ]
    return Verdict(
        id=f"sac-{101 + n}",
        status="ok",
        judge=JudgeInfo(kind="llm", model="qwen2.5-7b-instruct"),
        claims=[
            Claim(text=text, verdict="grounded", chunk_idx=(0, 0, 1)[i], source="llm")
            for i, text in enumerate(claims)
        ],
        score=1.0,
        hallucinated=False,
        metadata={"app": "sac-varejo"},
        evaluated_at=(datetime.now(UTC) - timedelta(minutes=n)).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        input=TripleInput(
            query="Posso desistir de uma compra feita pela internet? Em quanto tempo?",
            context=[
                CDC,
                "Os valores pagos serão devolvidos de imediato, monetariamente "
                "atualizados (art. 49, parágrafo único, do CDC).",
            ],
            answer=" ".join(claims[:2]) + " Além disso, " + claims[2][0].lower() + claims[2][1:],
        ),
    )


@pytest.fixture
def reviewing_site(tmp_path: Path) -> Iterator[tuple[str, str]]:
    url = f"sqlite:///{tmp_path / 'verdicts.db'}"
    store = open_store(url)
    store.write([answer_to_review(n).model_dump_json().encode() for n in range(3)])
    store.close()
    env = {"VEREDITO_READ_TOKENS": READ, "VEREDITO_REVIEW_TOKENS": f"{ANA}:ana,{BIA}:bia",
           "VEREDITO_REVIEW_SAMPLE": "1"}  # fmt: skip
    with reading(url, **env) as base:
        yield base, url


def press(driver: Any, *keys: str) -> None:
    """Keys to whatever has the focus, as a person types them."""
    from selenium.webdriver.common.action_chains import ActionChains

    ActionChains(driver).send_keys(*keys).perform()


def active_id(driver: Any) -> str:
    return str(driver.switch_to.active_element.get_attribute("id"))


def choose_with_arrows(driver: Any, value: str) -> None:
    """Move the focused list's choice with the arrow keys until it is ``value``."""
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import Select

    element = driver.switch_to.active_element
    assert element.tag_name == "select"
    for _ in range(12):
        if Select(element).first_selected_option.get_attribute("value") == value:
            return
        press(driver, Keys.ARROW_DOWN)
    raise AssertionError(f"the arrow keys never chose {value!r} in #{element.get_attribute('id')}")


def test_a_reviewer_labels_an_answer_with_the_keyboard_alone(
    browser: Any, reviewing_site: tuple[str, str], tmp_path: Path
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    site, url = reviewing_site
    status, before, _ = call(site, "GET", "/v1/agreement", token=READ)
    assert status == 200 and before["uniform"]["answers"] == 0
    browser.delete_all_cookies()
    browser.set_window_size(1280, 900)
    try:
        browser.get(site + "/entrar")
        assert active_id(browser) == "f-token"  # the token field has the focus
        shot(browser, tmp_path, "review-signin")
        press(browser, ANA, Keys.ENTER)
        wait(browser, lambda d: urlsplit(d.current_url).path == "/", "the list after signing in")
        cookie = browser.get_cookie("veredito_sessao")
        assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and ANA not in cookie["value"]
        assert "Revisor: ana" in browser.find_element(By.CSS_SELECTOR, "header.top").text

        press(browser, Keys.TAB)  # to "Próxima para revisar", by Tab alone
        for _ in range(20):
            if active_id(browser) == "proxima":
                break
            press(browser, Keys.TAB)
        else:
            raise AssertionError("Tab never reached 'Próxima para revisar'")
        press(browser, Keys.ENTER)
        wait(browser, lambda d: "/verdicts/" in d.current_url, "the answer to review")
        assert "motivo=uniform" in browser.current_url
        assert "amostra uniforme" in browser.find_element(By.CSS_SELECTOR, ".reason").text
        verdict_id = urlsplit(browser.current_url).path.rsplit("/", 1)[1]
        unlabelled = browser.execute_script(
            "return [...document.querySelectorAll('form input:not([type=hidden]), form select, "
            "form textarea')].filter(e => !e.labels || e.labels.length === 0).map(e => e.name)"
        )
        assert unlabelled == []

        press(browser, "j")  # the first claim
        assert active_id(browser) == "c0-certa"
        press(browser, "e")  # wrong: the focus goes to the verdict to put instead
        assert browser.find_element(By.ID, "c0-errada").is_selected()
        assert active_id(browser) == "f-verdict-0"
        choose_with_arrows(browser, "contradicted")
        press(browser, Keys.TAB)
        assert active_id(browser) == "f-category-0"
        choose_with_arrows(browser, "PRAZO_VALOR")
        press(browser, Keys.ESCAPE)  # out of the list, back to the claim
        assert active_id(browser) == "c0-errada"
        press(browser, "s")
        wait(browser, lambda d: "salvo=1" in d.current_url, "the answer page after saving")
        assert browser.find_element(By.CSS_SELECTOR, ".notice").text == "Rótulos salvos."
        assert browser.find_element(By.ID, "c0-errada").is_selected()  # her label, shown

        status, seen, _ = call(
            site, "GET", f"/v1/verdicts/{verdict_id}/labels?app=sac-varejo", token=READ
        )
        (stored,) = seen["labels"]
        assert stored["reviewer"] == "ana"
        assert stored["claims"] == [
            {"claim_idx": 0, "correct": False, "verdict": "contradicted", "category": "PRAZO_VALOR"}
        ]
        status, after, _ = call(site, "GET", "/v1/agreement", token=READ)
        assert after["uniform"]["answers"] == 1 and after["labels"] == 1
        assert after["uniform"]["answer_level"]["fn"] == 1  # the judge passed it: a miss
        assert after["uniform"]["categories"]["PRAZO_VALOR"]["fn"] == 1
        export = tmp_path / "reviewed.jsonl"
        done = subprocess.run(
            [sys.executable, "-m", "veredito", "labels", "export", "--from", url, "--to",
             str(export)],
            cwd=ROOT, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        (record,) = [json.loads(line) for line in export.read_text().splitlines()]
        assert record["id"] == verdict_id and record["reviewers"] == ["ana"]
        assert record["labels"]["hallucinated"] is True
        assert record["labels"]["spans"] == [
            {"text": answer_to_review(int(verdict_id[4:]) - 101).claims[0].text,
             "category": "PRAZO_VALOR", "verdict": "contradicted"}
        ]  # fmt: skip

        # another reviewer disagrees: shown beside the claim, for the picture in docs/review.md
        body = {"claims": [{"claim_idx": 0, "correct": True}], "note": "Li como certa."}
        path = f"/v1/verdicts/{verdict_id}/labels?app=sac-varejo"
        assert call(site, "POST", path, body, token=BIA)[0] == 201
        browser.get(browser.current_url.split("#")[0])
        others = browser.find_element(By.CSS_SELECTOR, "#c1 .others").text
        assert others == "Outros revisores discordam: bia: certa"
        browser.set_window_size(1280, 2250)  # the whole form
        shot(browser, tmp_path, "review-label")

        # c: right after all; n: save and on to the next answer of the queue
        browser.set_window_size(390, 844)
        overflow = browser.execute_script(
            "return document.documentElement.scrollWidth - document.documentElement.clientWidth"
        )
        assert overflow <= 0, f"the labelling form scrolls sideways by {overflow}px on a phone"
        press(browser, "j", "c")
        assert browser.find_element(By.ID, "c0-certa").is_selected()
        press(browser, "n")
        wait(browser, lambda d: "anterior=salva" in d.current_url, "the next answer")
        assert f"/verdicts/{verdict_id}?" not in browser.current_url
        assert "anterior salvos" in browser.find_element(By.CSS_SELECTOR, ".notice").text
        status, seen, _ = call(site, "GET", path, token=READ)
        assert [s["claims"][0]["correct"] for s in seen["labels"] if s["reviewer"] == "ana"] == [
            False,
            True,
        ]
    finally:
        browser.delete_all_cookies()


ATTACK_PAGE = """<!doctype html><meta charset="utf-8"><title>promoção</title>
<p>Uma página de outra porta do mesmo host: o mesmo site para o navegador (SameSite).</p>
{images}
<form id="f" method="post" action="{site}/sair"><input name="csrf" value="{zeros}"></form>
<script>
let left = {count};
for (const img of document.images) {{
  img.onerror = img.onload = () => {{ if (--left === 0) document.getElementById("f").submit(); }};
}}
</script>
"""


def test_a_same_site_page_neither_empties_the_queue_nor_signs_the_reviewer_out(
    browser: Any, reviewing_site: tuple[str, str], tmp_path: Path
) -> None:
    """Found (issue 27): six <img> tags on a same-site page emptied a reviewer's queue (GET
    /revisar/proxima took answers), and POST /sair from a foreign Origin logged them out."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    site, _ = reviewing_site
    page = ATTACK_PAGE.format(
        site=site,
        zeros="0" * 64,
        count=6,
        images="\n".join(f'<img src="{site}/revisar/proxima?n={n}">' for n in range(6)),
    ).encode()

    class Attacker(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.end_headers()
            self.wfile.write(page)

        def log_message(self, *_: Any) -> None:
            pass

    attacker = ThreadingHTTPServer(("127.0.0.1", 0), Attacker)
    threading.Thread(target=attacker.serve_forever, daemon=True).start()
    browser.delete_all_cookies()
    try:
        browser.get(site + "/entrar")
        press(browser, ANA, Keys.ENTER)
        wait(browser, lambda d: urlsplit(d.current_url).path == "/", "the list after signing in")
        browser.get(f"http://127.0.0.1:{attacker.server_address[1]}/")
        wait(browser, lambda d: urlsplit(d.current_url).path == "/sair", "the forged sign-out")
        assert "Origem recusada" in browser.page_source  # 403: a foreign Origin
        browser.get(site + "/")
        header = browser.find_element(By.CSS_SELECTOR, "header.top").text
        assert "Revisor: ana" in header  # still signed in
    finally:
        attacker.shutdown()
    # the six GETs took nothing: the queue still hands this reviewer all three answers
    served = set()
    for _ in range(3):
        status, found, _ = call(site, "GET", "/v1/review/next", token=ANA)
        assert status == 200, found
        served.add(found["id"])
    assert served == {"sac-101", "sac-102", "sac-103"}
