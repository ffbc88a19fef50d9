"""Which device a run or a workflow job uses (`arbench.device`)."""

from __future__ import annotations

import pytest
import torch

from arbench.device import job_device, resolve_device


def test_a_job_given_a_gpu_uses_cuda_where_it_sees_one_and_a_cpu_job_the_cpu() -> None:
    assert job_device(1) == "auto" and job_device(0) == "cpu" and job_device(None) == "cpu"
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert resolve_device(job_device(1)).type == expected
    assert resolve_device(job_device(0)).type == "cpu"


@pytest.mark.skipif(torch.cuda.is_available(), reason="asks for CUDA where there is none")
def test_cuda_asked_without_one_is_an_error() -> None:
    with pytest.raises(RuntimeError, match="no CUDA device is visible"):
        resolve_device("cuda")
