"""Issue 19: doctor's "no service of this profile needs it" WARNs collapse into one line when shown."""

from __future__ import annotations

from ddtree_tui.doctor import DoctorReport, Finding, collapse_unneeded, render


def _missing(name: str) -> Finding:
    return Finding(
        check=name,
        status="warn",
        evidence=f"{name} is not installed in /usr/bin/python3 (no service of this profile needs it)",
    )


def test_unneeded_packages_collapse_into_one_warn() -> None:
    findings = [
        Finding(check="python", status="ok", evidence="Python 3.11"),
        *(_missing(n) for n in ("torch", "sglang", "triton")),
        Finding(
            check="nvidia-smi", status="warn", evidence="nvidia-smi is not on the PATH", fix="install it"
        ),
    ]
    out = collapse_unneeded(findings)
    assert [f.check for f in out] == ["python", "unused packages", "nvidia-smi"]
    assert out[1].evidence.endswith("no service of this profile needs them: torch, sglang, triton")
    text = render(DoctorReport(host="local", address="local", findings=findings))
    assert text.splitlines()[0] == "doctor local (local): 1 ok, 2 warn, 0 fail"
    assert text.count("needs them") == 1 and "needs it" not in text


def test_a_single_unneeded_package_stays_as_it_is() -> None:
    findings = [_missing("torch")]
    assert collapse_unneeded(findings) == findings
