"""Hardware profile names: stable slugs from what does not drift, GPU first, CPU otherwise."""

from __future__ import annotations

import pytest

from pytest_swarm.telemetry.hardware import HardwareProfile, cpu_slug, fingerprint, gpu_slug, profile_name


@pytest.mark.parametrize(
    ("name", "one", "two"),
    [
        ("NVIDIA GeForce RTX 3090", "rtx3090", "rtx3090x2"),
        ("NVIDIA H100 80GB HBM3", "h100", "h100x2"),
        ("NVIDIA A100-SXM4-80GB", "a100", "a100x2"),
        ("NVIDIA H200", "h200", "h200x2"),
        ("NVIDIA RTX A6000", "rtxa6000", "rtxa6000x2"),
        ("Tesla T4", "t4", "t4x2"),
        ("NVIDIA GeForce RTX 4090 D", "rtx4090d", "rtx4090dx2"),
    ],
)
def test_gpu_slugs_name_the_model_and_count_not_the_memory_variant(name: str, one: str, two: str) -> None:
    assert gpu_slug([name]) == one
    assert gpu_slug([name, name]) == two


@pytest.mark.parametrize(
    ("model", "cores", "slug"),
    [
        ("AMD EPYC Processor", 2, "cpu-epyc-2c"),
        ("AMD EPYC 7B13 64-Core Processor", 2, "cpu-epyc-7b13-2c"),
        ("Intel(R) Xeon(R) Processor", 2, "cpu-xeon-2c"),
        ("Intel(R) Xeon(R) CPU @ 2.20GHz", 4, "cpu-xeon-4c"),
        ("Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz", 2, "cpu-xeon-platinum-8481c-2c"),
        ("Apple M2", 8, "cpu-apple-m2-8c"),
        ("", 2, "cpu-unknown-2c"),
    ],
)
def test_cpu_slugs_drop_vendor_noise_and_clocks(model: str, cores: int, slug: str) -> None:
    assert cpu_slug(model, cores) == slug


def test_the_profile_is_the_gpu_slug_when_nvml_sees_gpus_else_the_cpu_slug() -> None:
    with_gpus = {
        "cpu": "AMD EPYC Processor",
        "cores": 16,
        "gpus": ["NVIDIA H100 80GB HBM3"],
        "nvml": "ok",
        "driver": "550",
        "cuda": "12.4",
    }
    assert profile_name(with_gpus) == "h100"
    without = {"cpu": "AMD EPYC Processor", "cores": 2, "gpus": [], "nvml": "not available (NVMLError_LibraryNotFound)"}
    assert profile_name(without) == "cpu-epyc-2c"


def test_this_machine_without_nvml_gets_a_cpu_profile_and_says_why_there_are_no_gpus() -> None:
    """No machine of this project has a GPU: NVML's absence is reported, not an error."""
    print_ = fingerprint()
    if print_["gpus"]:
        pytest.skip(f"this machine has GPUs: {print_['gpus']}")
    assert print_["nvml"].startswith("not available")
    profile = HardwareProfile.detect()
    assert profile.name == cpu_slug(print_["cpu"], print_["cores"]) and profile.name.startswith("cpu-")
    assert profile.header() == [
        f"swarm: hardware profile {profile.name}; CPU {print_['cpu']} x{print_['cores']} cores; GPUs none (NVML {print_['nvml']})"
    ]
    assert HardwareProfile.detect("rtx3090").name == "rtx3090"


def test_a_gpu_fingerprint_adds_the_driver_line_to_the_header() -> None:
    profile = HardwareProfile(
        "h100x2",
        {
            "cpu": "c",
            "cores": 2,
            "gpus": ["NVIDIA H100", "NVIDIA H100"],
            "nvml": "ok",
            "driver": "550.54",
            "cuda": "12.4",
        },
    )
    assert profile.header()[1] == "swarm: NVIDIA driver 550.54, CUDA 12.4"
    assert "GPUs NVIDIA H100, NVIDIA H100" in profile.header()[0]
