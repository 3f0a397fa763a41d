"""Routes added for the web UI, over HTTP on the shared server (bundled chat model launched): the static UI and
its redirects, model logs, engine option schemas, chat-template preview, devices and version."""

from __future__ import annotations

import httpx

from tests.conftest import DEFAULT_MODEL, LocalServer


def test_ui_is_served_and_root_redirects(local_server: LocalServer) -> None:
    root = httpx.get(f"{local_server.endpoint}/", timeout=10)
    assert root.status_code == 307 and root.headers["location"] == "/ui/"
    assert httpx.get(f"{local_server.endpoint}/ui", timeout=10).headers["location"] == "/ui/"
    page = httpx.get(f"{local_server.endpoint}/ui/", timeout=10)
    assert page.status_code == 200 and 'type="importmap"' in page.text
    for path in ("app.js", "vendor/preact.js", "pages/chat.js", "lib/sse.js"):
        asset = httpx.get(f"{local_server.endpoint}/ui/{path}", timeout=10)
        assert asset.status_code == 200 and "javascript" in asset.headers["content-type"], path
    assert "https://" not in page.text  # nothing loaded from elsewhere
    csp = page.headers["content-security-policy"]
    assert "script-src 'self' 'sha256-" in csp and "unsafe" not in csp and "frame-ancestors 'none'" in csp
    # the Audio page plays what it made (blob: URLs only the page itself can create), nothing from elsewhere
    assert "media-src 'self' blob:;" in csp
    assert httpx.get(f"{local_server.endpoint}/ui/nope.js", timeout=10).status_code == 404
    assert httpx.get(f"{local_server.endpoint}/ui/%2e%2e/settings.py", timeout=10).status_code == 404


def test_model_logs(local_server: LocalServer) -> None:
    url = f"{local_server.api}/models/{DEFAULT_MODEL}/logs"
    body = httpx.get(url, params={"tail": 3}, timeout=10).json()
    assert body["model_uid"] == DEFAULT_MODEL and body["replica_uid"] == f"{DEFAULT_MODEL}-0"
    assert 0 < len(body["lines"]) <= 3 and body["offset"] <= body["size"]
    assert all(str(local_server.home) not in line for line in body["lines"])
    assert httpx.get(url, params={"replica": "0", "since": body["offset"]}, timeout=10).json()["reset"] is False
    assert httpx.get(url, params={"since": 10**12}, timeout=10).json()["reset"] is True
    missing = httpx.get(f"{local_server.api}/models/no-such-model/logs", timeout=10)
    assert missing.status_code == 404 and "no-such-model" in missing.json()["error"]["message"]
    assert httpx.get(url, params={"replica": "9"}, timeout=10).status_code == 404
    for bad in ({"tail": -1}, {"tail": 100000}, {"since": -5}):
        response = httpx.get(url, params=bad, timeout=10)
        assert response.status_code == 400, (bad, response.text)
    assert httpx.get(f"{local_server.api}/models/bad..name/logs", timeout=10).status_code == 400


def test_engine_schemas(local_server: LocalServer) -> None:
    every = httpx.get(f"{local_server.api}/engine_schemas", timeout=10).json()
    assert {"llama.cpp", "Transformers", "vLLM", "sentence_transformers"} <= set(every)
    llama = httpx.get(f"{local_server.api}/engine_schemas/LLAMA.CPP", timeout=10).json()
    assert llama["engine"] == "llama.cpp" and llama["model_formats"] == ["ggufv2"]
    props = llama["schema"]["properties"]
    assert "n_ctx" in props and "n_parallel" in props and llama["schema"]["additionalProperties"] is False
    unknown = httpx.get(f"{local_server.api}/engine_schemas/nonesuch", timeout=10)
    assert unknown.status_code == 400 and "llama.cpp" in unknown.json()["error"]["message"]


def test_chat_template_preview(local_server: LocalServer) -> None:
    url = f"{local_server.api}/chat_templates/render"
    sample = httpx.post(url, json={"chat_template": "{% for m in messages %}{{ m.role }}|{% endfor %}"}, timeout=10)
    assert sample.status_code == 200 and sample.json()["prompt"] == "system|user|assistant|user|"
    own = httpx.post(
        url,
        timeout=10,
        json={
            "chat_template": "{{ bos_token }}{{ messages[0].content }}{% if add_generation_prompt %}>{% endif %}",
            "messages": [{"role": "user", "content": "hi"}],
            "bos_token": "<s>",
            "add_generation_prompt": False,
        },
    )
    assert own.json()["prompt"] == "<s>hi"
    unsafe = httpx.post(url, json={"chat_template": "{{ messages.__class__.__mro__ }}"}, timeout=10)
    assert unsafe.status_code == 400
    broken = httpx.post(url, json={"chat_template": "{% for %}"}, timeout=10)
    assert broken.status_code == 400 and "compile" in broken.json()["error"]["message"]
    assert httpx.post(url, json={}, timeout=10).status_code == 400


def test_cluster_devices_and_version(local_server: LocalServer) -> None:
    info = httpx.get(f"{local_server.api}/cluster/info", timeout=10).json()
    gpus = sum(len(w["hardware"]["gpus"]) for w in info["workers"])
    assert isinstance(info["devices"], list) and len(info["devices"]) == gpus
    version = httpx.get(f"{local_server.api}/cluster/version", timeout=10).json()["version"]
    import xinference

    assert version == xinference.__version__
