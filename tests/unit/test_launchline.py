"""Golden argv for every algorithm and mode: the exact words `launch --dry-run` prints and the launch runs."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest

from ddtree_tui.config import parse_profile
from ddtree_tui.services.launchline import argv_hash, build_launch, missing_ddtree_switches

HOST = """
name = "ct200"
address = "ct200"
python = "/opt/sglang/.venv/bin/python"
workdir = "/var/tmp/ddtree"
[env]
LD_LIBRARY_PATH = "/opt/cu13/lib"
"""
PY = "/opt/sglang/.venv/bin/python"
COMMON = ["--model-path", "/models/T", "--host", "127.0.0.1"]


def _spec(body: str, host: str = HOST) -> tuple:
    prof = parse_profile(host + "\n[[service]]\n" + body)
    return prof, prof.services[0]


def test_baseline_argv() -> None:
    prof, spec = _spec('name = "base"\nalgorithm = "baseline"\nmodel = "/models/T"\nport = 30000\n')
    cmd = build_launch(prof, spec)
    assert cmd.argv == [PY, "-m", "sglang.launch_server", *COMMON, "--port", "30000", "--tp-size", "1",
                        "--trust-remote-code", "--enable-metrics"]  # fmt: skip
    assert cmd.env == {"LD_LIBRARY_PATH": "/opt/cu13/lib"}
    assert cmd.log_path == "/var/tmp/ddtree/logs/base.log"
    assert cmd.pidfile_path == "/var/tmp/ddtree/run/base.json"
    assert cmd.cwd == "/var/tmp/ddtree"


def test_dflash_argv_full() -> None:
    prof, spec = _spec(
        'name = "dflash"\nalgorithm = "dflash"\nmodel = "/models/T"\ndraft_model = "/models/D"\nport = 30010\n'
        'gpus = [1]\nattention_backend = "triton"\ndraft_attention_backend = "fa4"\nblock_size = 16\n'
        'mem_fraction_static = 0.75\nmamba_radix_cache_strategy = "extra_buffer"\nserved_model_name = "qwen"\n'
        'extra_args = ["--decode-log-interval", "10"]\nenv = { SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN = "1" }\n'
    )
    cmd = build_launch(prof, spec)
    assert cmd.argv == [
        PY, "-m", "sglang.launch_server", *COMMON, "--port", "30010", "--tp-size", "1",
        "--attention-backend", "triton",
        "--speculative-algorithm", "DFLASH", "--speculative-draft-model-path", "/models/D",
        "--speculative-num-draft-tokens", "16", "--speculative-dflash-block-size", "16",
        "--speculative-draft-attention-backend", "fa4",
        "--mem-fraction-static", "0.75", "--mamba-radix-cache-strategy", "extra_buffer", "--trust-remote-code",
        "--served-model-name", "qwen", "--enable-metrics", "--decode-log-interval", "10",
    ]  # fmt: skip
    assert cmd.env == {
        "CUDA_VISIBLE_DEVICES": "1",
        "LD_LIBRARY_PATH": "/opt/cu13/lib",
        "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN": "1",
    }


def test_old_strategy_key_launches_the_new_flag() -> None:
    """`mamba_scheduler_strategy` (the old key) still reads, but 0.5.20+ knows only the new flag."""
    prof, spec = _spec(
        'name = "d"\nalgorithm = "dflash"\nmodel = "/m"\ndraft_model = "/d"\nport = 1\n'
        'mamba_scheduler_strategy = "extra_buffer"\n'
    )
    argv = build_launch(prof, spec).argv
    assert argv[argv.index("--mamba-radix-cache-strategy") + 1] == "extra_buffer"
    assert "--mamba-scheduler-strategy" not in argv


DDTREE = 'name = "dd"\nalgorithm = "ddtree"\nmodel = "/models/T"\ndraft_model = "/models/D"\nport = 30011\nbudget = 32\nblock_size = 16\n'
SPEC_HEAD = ["--speculative-draft-model-path", "/models/D", "--speculative-num-draft-tokens", "16",
             "--speculative-dflash-block-size", "16"]  # fmt: skip


@pytest.mark.parametrize(
    ("mode", "unsafe", "tail", "missing"),
    [
        ("shadow-linear", False, ["--speculative-ddtree-budget", "32"], ["shadow_linear"]),
        ("shadow-linear", True, ["--speculative-ddtree-budget", "32"], ["shadow_linear"]),
        ("tree", False, ["--speculative-ddtree-budget", "32"], []),
        ("tree", True, ["--speculative-ddtree-budget", "32"], ["allow_hybrid_unsafe"]),
    ],
)
def test_ddtree_argv_default_flags(mode: str, unsafe: bool, tail: list[str], missing: list[str]) -> None:
    """The defaults are the open upstream PR's (DDTREE, --speculative-ddtree-budget); the shadow-linear and
    hybrid-unsafe switches exist in no public code, so nothing is invented for them: the launch check refuses
    until [ddtree_flags] names this build's switch."""
    body = DDTREE + f'mode = "{mode}"\nallow_hybrid_unsafe = {str(unsafe).lower()}\n'
    prof, spec = _spec(body)
    argv = build_launch(prof, spec).argv
    assert argv == [PY, "-m", "sglang.launch_server", *COMMON, "--port", "30011", "--tp-size", "1",
                    "--speculative-algorithm", "DDTREE", *SPEC_HEAD, *tail,
                    "--trust-remote-code", "--enable-metrics"]  # fmt: skip
    assert missing_ddtree_switches(prof, spec) == missing


def test_ddtree_switch_as_environment() -> None:
    host = HOST + '[ddtree_flags]\nshadow_linear = "SGLANG_DDTREE_SHADOW_LINEAR=1"\n'
    prof, spec = _spec(DDTREE + 'mode = "shadow-linear"\n', host)
    cmd = build_launch(prof, spec)
    assert cmd.env["SGLANG_DDTREE_SHADOW_LINEAR"] == "1" and "SGLANG_DDTREE_SHADOW_LINEAR=1" not in cmd.argv
    assert missing_ddtree_switches(prof, spec) == []


def test_ddtree_argv_per_host_flag_table() -> None:
    host = HOST + (
        '[ddtree_flags]\nalgorithm = "DFLASH_TREE"\nbudget = "--tree-budget"\nshadow_linear = "--tree-shadow"\n'
        'allow_hybrid_unsafe = "--tree-unsafe"\n'
    )
    prof, spec = _spec(DDTREE + 'mode = "tree"\nallow_hybrid_unsafe = true\n', host)
    argv = build_launch(prof, spec).argv
    assert argv[argv.index("--speculative-algorithm") + 1] == "DFLASH_TREE"
    assert argv[argv.index("--tree-budget") + 1] == "32"
    assert "--tree-unsafe" in argv and "--speculative-ddtree-budget" not in argv
    prof, spec = _spec(DDTREE + 'mode = "shadow-linear"\n', host)
    argv = build_launch(prof, spec).argv
    assert "--tree-shadow" in argv and "--tree-unsafe" not in argv


def test_sim_argv_and_local_python() -> None:
    prof = parse_profile(
        'name = "local"\naddress = "local"\npython = "python3"\nworkdir = ".ddtree/demo"\n[[service]]\n'
        'name = "dd"\nalgorithm = "ddtree"\nmode = "shadow-linear"\nlauncher = "sim"\nport = 31011\n'
        "gpus = [0]\n[service.sim]\naccept_length = 3.4\ndecode_rate = 40.5\nload_time = 2.0\nseed = 2\n"
    )
    cmd = build_launch(prof, prof.services[0])
    assert cmd.argv == [sys.executable, "-m", "ddtree_tui.cli", "sim", "--algorithm", "ddtree",
                        "--mode", "shadow-linear", "--port", "31011", "--host", "127.0.0.1",
                        "--accept-length", "3.4", "--decode-rate", "40.5", "--load-time", "2", "--seed", "2"]  # fmt: skip
    assert cmd.cwd == str(Path(".ddtree/demo").absolute())
    assert cmd.env == {"CUDA_VISIBLE_DEVICES": "0"}


def test_display_is_the_shell_line_and_masks_secrets() -> None:
    prof, spec = _spec(
        'name = "b"\nalgorithm = "baseline"\nmodel = "/models/my model"\nport = 30000\n'
        'env = { HF_TOKEN = "hunter2", A = "x y" }\n'
    )
    cmd = build_launch(prof, spec)
    line = cmd.display()
    assert "hunter2" not in line and "HF_TOKEN=***" in line
    words = shlex.split(line)
    assert words[:3] == ["cd", "/var/tmp/ddtree", "&&"]
    assert words[3] == "env" and "A=x y" in words
    i = words.index(PY)
    assert words[i : i + len(cmd.argv)] == cmd.argv
    assert line.endswith(" >> /var/tmp/ddtree/logs/b.log 2>&1")
    assert "hunter2" in cmd.display(redact=False)
    assert argv_hash(cmd.argv) == cmd.argv_hash() and len(cmd.argv_hash()) == 16


def test_secret_names_and_flags_are_masked_but_ordinary_ones_are_not() -> None:
    """Issue 20 item 5: by name (env) and by flag (argv), and nothing that merely mentions tokens."""
    from ddtree_tui.config import is_secret_name, redact_argv, redact_text, secret_values

    for name in ("WANDB_KEY", "PRIVATE_KEY", "AWS_ACCESS_KEY_ID", "HF_TOKEN", "OPENAI_API_KEY", "DB_PASSWORD",
                 "--api-key", "--hf-token", "--admin-api-key", "AUTH_TOKEN"):  # fmt: skip
        assert is_secret_name(name), name
    for name in ("CUDA_VISIBLE_DEVICES", "PYTHONPATH", "--max-total-tokens", "--tokenizer-path",
                 "TOKENIZERS_PARALLELISM", "--skip-tokenizer-init", "--model-path", "MONKEY"):  # fmt: skip
        assert not is_secret_name(name), name
    argv = ["py", "--api-key", "s3cret-a", "--hf-token=s3cret-b", "--max-total-tokens", "4096"]
    assert redact_argv(argv) == ["py", "--api-key", "***", "--hf-token=***", "--max-total-tokens", "4096"]
    vals = secret_values(argv, {"WANDB_KEY": "s3cret-c", "PATH": "/bin"})
    assert vals == {"s3cret-a", "s3cret-b", "s3cret-c"}
    assert redact_text("ServerArgs(api_key='s3cret-a')", vals) == "ServerArgs(api_key='***')"
