"""The fault suite as CI runs it: ``tests/faults/harness.py --short`` kills builds, trainings and
probes with SIGKILL, runs two writers on one output folder and feeds corrupt inputs; nothing may be lost,
and every case must survive (the earlier output loads, the rerun completes)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.slow
def test_fault_suite_loses_nothing(medlama_source, elicit_corpora):
    result = subprocess.run([sys.executable, str(Path(__file__).with_name("harness.py")), "--short"],
                            capture_output=True, text=True, timeout=900)
    report = "\n".join(line for line in result.stdout.splitlines() if not line.startswith(("Generating", "Creating")))
    summary = re.search(r"^faults: (\d+) tried, (\d+) survived, (\d+) lost \((\d+) unclear errors\)$", result.stdout,
                        re.MULTILINE)
    assert summary, f"no summary line\n{report}\n{result.stderr[-4000:]}"
    print(report)
    tried, survived, lost, unclear = map(int, summary.groups())
    assert lost == 0, report
    assert unclear == 0, report  # every corrupt input gets a clear error, not a traceback
    assert tried >= 20 and survived == tried, report
    assert result.returncode == 0, report
