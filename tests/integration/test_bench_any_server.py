"""Bench and smoke any running server, not only ours: `--url` with `--api chat` against a real HTTP server
that speaks only the OpenAI chat API and never sends [DONE] (tests/fixtures/openai_compat/chat_only_server.py),
`smoke --api chat`, and HTTP_PROXY never used for our loopback ports."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ddtree_tui.cli import main
from tests.fixtures.openai_compat.chat_only_server import MODEL, ChatOnlyServer

pytestmark = pytest.mark.timeout(120)


def _url_bench(url: str, tmp_path: Path, *extra: str) -> list[str]:
    """`--run-bench --url URL --api chat` with no warm-up and a history file of the test's own."""
    argv = ["--run-bench", "--url", url, "--api", "chat", "--warmup", "0", *extra]
    return [*argv, "--history", str(tmp_path / "h.jsonl")]


@pytest.fixture
def no_proxy_allowed(monkeypatch):
    """A proxy that does not exist: any request sent through it fails, so passing proves none was used."""
    for k in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.setenv(k, "http://127.0.0.1:9")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)


def test_url_bench_of_a_chat_only_server_without_done(tmp_path: Path, capsys, no_proxy_allowed) -> None:
    out = tmp_path / "r.json"
    with ChatOnlyServer() as srv:
        rc = main(
            _url_bench(srv.url, tmp_path, "--max-new-tokens", "8", "--repeats", "2", "--json", str(out))
        )
        bodies = list(srv.bodies)
    err = capsys.readouterr().err
    assert rc == 0, err
    run = json.loads(out.read_text())
    assert run["failed"] == 0 and run["results"], err
    for r in run["results"]:
        assert r["ok"] and r["output_tokens"] == 8 and r["finish_reason"] == "length"
        assert r["tokens_source"] == "usage-estimated"
        assert r["itl_p50_ms"] and r["itl_p50_ms"] > 3  # 10 ms a token, not all of them on the last chunk
    assert run["targets"][0]["ref"] == srv.url.removeprefix("http://")
    # the model came from /v1/models; ignore_eos was not sent (the server would answer 422)
    chats = [b for p, b in bodies if p == "/v1/chat/completions"]
    assert chats and all(b["model"] == MODEL and "ignore_eos" not in b for b in chats)


def test_url_bench_errors_are_shown_from_detail(tmp_path: Path, capsys, no_proxy_allowed) -> None:
    with ChatOnlyServer() as srv:
        rc = main(_url_bench(srv.url, tmp_path, "--max-new-tokens", "4", "--model", "wrong", "--ignore-eos"))
    err = capsys.readouterr().err
    assert rc == 1
    assert "HTTP 422: body.ignore_eos: Extra inputs are not permitted" in err


def test_url_usage_errors(capsys) -> None:
    assert main(["--run-bench", "--url", "ftp://x"]) == 2
    assert main(["--run-bench", "--url", "http://127.0.0.1:1/v1"]) == 2
    assert main(["--run-bench", "--url", "http://127.0.0.1:1", "--services", "a/b"]) == 2
    err = capsys.readouterr().err
    assert "expected http://HOST:PORT" in err and "without a path" in err and "leave out --services" in err


def test_smoke_api_chat_by_url(capsys, no_proxy_allowed) -> None:
    with ChatOnlyServer() as srv:
        rc = main(["smoke", srv.url, "--api", "chat", "--max-new-tokens", "6", "--json"])
        out = json.loads(capsys.readouterr().out)
        assert rc == 0, out
        assert out["ok"] and out["output_tokens"] == 6 and out["output"].startswith("Hello")
        # /generate on a server without it: a failure, exit 1, the body's detail shown
        rc = main(["smoke", srv.url, "--max-new-tokens", "6"])
        line = capsys.readouterr().out
        assert rc == 1 and "HTTP 404: Not Found" in line


def test_smoke_of_an_aborting_server_exits_nonzero(capsys) -> None:
    """The simulated server with a KV capacity aborts the request (503) as decode retraction does: the smoke
    test fails, says why, exits 1; the bench counts it as failed and aborted, out of every median."""
    from ddtree_tui.sim.config import SimConfig
    from ddtree_tui.sim.process import SimProcess

    with SimProcess(SimConfig(decode_rate=400, accept_length=2.0, kv_capacity=60)) as sim:
        sim.wait_healthy(20)
        rc = main(["smoke", sim.base_url, "--max-new-tokens", "200"])
        line = capsys.readouterr().out
        assert rc == 1 and "aborted by the server (503): Retracted under decode memory pressure" in line
        rc = main(["smoke", sim.base_url, "--max-new-tokens", "10"])
        assert rc == 0, capsys.readouterr().out
