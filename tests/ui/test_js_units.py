"""Unit tests of the UI's pure modules (the SSE parser, the launch-command builder, ...), run in Chromium.

The modules are imported by the page itself (``import()``), so what is tested is exactly what the browser runs;
no node. The UI folder is served by a small static server in this process.
"""

from __future__ import annotations

import functools
import http.server
import re
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from xinference.api.admin.ui import UI_DIR


@pytest.fixture(scope="module")
def ui_static() -> Iterator[str]:
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(UI_DIR))
    handler.log_message = lambda *args: None  # type: ignore[method-assign]
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def page(browser: Any, ui_static: str) -> Iterator[Any]:
    context = browser.new_context()
    page = context.new_page()
    # A blank page on the same origin: modules are imported one by one, the app itself is not started.
    # It carries index.html's import map, so bare specifiers ("preact", "marked") resolve as in the app.
    import_map = re.search(r'<script type="importmap">.*?</script>', (UI_DIR / "index.html").read_text(), re.S)
    assert import_map is not None
    blank = f"<!doctype html><title>units</title>{import_map.group(0)}"
    page.route(f"{ui_static}/blank.html", lambda route: route.fulfill(body=blank, content_type="text/html"))
    page.goto(f"{ui_static}/blank.html")
    try:
        yield page
    finally:
        context.close()


def run(page: Any, module: str, body: str) -> Any:
    """Evaluate ``body`` (an async function body with ``m`` = the imported module) in the page."""
    return page.evaluate(f"async () => {{ const m = await import('/{module}'); {body} }}")


# -- SSE parser ------------------------------------------------------------------------------------------------


def test_sse_events_split_across_reads(page: Any) -> None:
    events = run(
        page,
        "lib/sse.js",
        """
        const p = new m.SseParser();
        const out = [];
        for (const piece of ['da', 'ta: {"a":', '1}\\n', '\\ndata: [DO', 'NE]\\n\\n']) out.push(...p.push(piece));
        return out;
    """,
    )
    assert events == [
        {"event": "message", "data": '{"a":1}', "id": None},
        {"event": "message", "data": "[DONE]", "id": None},
    ]


def test_sse_line_endings_comments_fields_and_multiline_data(page: Any) -> None:
    events = run(
        page,
        "lib/sse.js",
        """
        const p = new m.SseParser();
        const out = [];
        // CRLF split between reads, a lone CR, a keep-alive comment, event/id fields, two data lines.
        out.push(...p.push(': keep-alive\\r\\nevent: error\\r'));
        out.push(...p.push('\\nid: 7\\rdata: line one\\ndata:line two\\r\\n\\r\\n'));
        out.push(...p.push('data: no blank line yet'));
        out.push(...p.finish());
        return out;
    """,
    )
    assert events == [{"event": "error", "data": "line one\nline two", "id": "7"}]


def test_sse_blank_lines_without_data_dispatch_nothing(page: Any) -> None:
    events = run(page, "lib/sse.js", "const p = new m.SseParser(); return p.push('\\n\\nevent: x\\n\\n:c\\n\\n');")
    assert events == []


def test_read_json_stream_counts_reads_and_stops_at_done(page: Any) -> None:
    result = run(
        page,
        "lib/sse.js",
        """
        const pieces = ['data: {"n":1}\\n\\n', 'data: {"n":2}\\n\\ndata: {"n":3}\\n\\n', ': ping\\n\\n',
                        'data: [DONE]\\n\\n', 'data: {"n":99}\\n\\n'];
        const enc = new TextEncoder();
        const body = new ReadableStream({ start(c) { for (const s of pieces) c.enqueue(enc.encode(s)); c.close(); } });
        const seen = [];
        const reads = await m.readJsonStream(new Response(body), (d) => seen.push(d.n));
        return { seen, reads };
    """,
    )
    assert result == {"seen": [1, 2, 3], "reads": 3}  # the comment-only read carried no frame


def test_read_json_stream_raises_on_an_error_frame(page: Any) -> None:
    message = run(
        page,
        "lib/sse.js",
        """
        const text = 'data: {"n":1}\\n\\ndata: {"error": {"message": "engine died"}}\\n\\ndata: [DONE]\\n\\n';
        try { await m.readJsonStream(new Response(text), () => {}); return 'no error'; }
        catch (e) { return e.constructor.name + ': ' + e.message; }
    """,
    )
    assert message == "StreamError: engine died"


def test_read_json_stream_handles_utf8_split_inside_a_character(page: Any) -> None:
    text = run(
        page,
        "lib/sse.js",
        """
        const bytes = new TextEncoder().encode('data: {"t":"Paris \u00e9t\u00e9 \u2713"}\\n\\n');
        const body = new ReadableStream({ start(c) {
            for (let i = 0; i < bytes.length; i += 3) c.enqueue(bytes.slice(i, i + 3)); c.close(); } });
        let out = '';
        await m.readJsonStream(new Response(body), (d) => { out += d.t; });
        return out;
    """,
    )
    assert text == "Paris \u00e9t\u00e9 \u2713"


# -- launch command builder ------------------------------------------------------------------------------------


def test_launch_command_defaults_are_left_out(page: Any) -> None:
    command = run(
        page,
        "lib/launch_cmd.js",
        """
        return m.buildLaunchCommand({model_name: 'smollm2-instruct', model_type: 'LLM', model_engine: 'llama.cpp',
            model_format: 'ggufv2', model_size_in_billions: '0_135', quantization: 'Q4_1', replica: 1},
            'http://127.0.0.1:9997/');
    """,
    )
    assert command == "xinference launch -n smollm2-instruct -en llama.cpp -f ggufv2 -s 0_135 -q Q4_1"


def test_launch_command_options_placement_endpoint_and_quoting(page: Any) -> None:
    command = run(
        page,
        "lib/launch_cmd.js",
        """
        return m.buildLaunchCommand({model_name: 'my-model', model_type: 'embedding', model_uid: 'emb 1',
            replica: 2, n_gpu: null, worker_ip: '10.0.0.2:3000', gpu_idx: [0, 1], n_ctx: 4096, kv_unified: false,
            chat_template: "it's", wait_ready: false, empty: ''}, 'http://gpu-box:9997');
    """,
    )
    assert command == (
        "xinference launch -n my-model -t embedding -u 'emb 1' -r 2 --n-gpu none --worker_ip 10.0.0.2:3000 "
        "--gpu_idx 0,1 --n_ctx 4096 --kv_unified false --chat_template 'it'\\''s' -e http://gpu-box:9997"
    )


def test_launch_command_round_trips_through_the_cli_parser(page: Any) -> None:
    # What the page prints must be what the CLI understands: parse it back with the CLI's own option parser.
    import shlex

    from xinference.cli.options import parse_engine_options

    command = run(
        page,
        "lib/launch_cmd.js",
        """
        return m.buildLaunchCommand({model_name: 'smollm2-instruct', n_ctx: 2048, n_parallel: 1,
            flash_attn: 'off', cache_prompt: true}, '');
    """,
    )
    words = shlex.split(command)
    assert words[:4] == ["xinference", "launch", "-n", "smollm2-instruct"]
    assert parse_engine_options(words[4:]) == {
        "n_ctx": 2048,
        "n_parallel": 1,
        "flash_attn": "off",
        "cache_prompt": True,
    }


# -- small helpers ---------------------------------------------------------------------------------------------


def test_markdown_is_sanitised(page: Any) -> None:
    out = run(
        page,
        "lib/markdown.js",
        """
        return m.renderMarkdown('**bold** <img src=x onerror=alert(1)><script>alert(2)</script>'
            + '[x](javascript:alert(3))\\n\\n```py\\nprint(1)\\n```');
    """,
    )
    assert "<strong>bold</strong>" in out
    assert "<pre><code" in out and "print(1)" in out
    for bad in ("onerror", "<script", "javascript:", "<img"):
        assert bad not in out


def test_error_message_reads_both_error_shapes(page: Any) -> None:
    out = run(
        page,
        "lib/api.js",
        """
        return [m.errorMessage({error: {message: 'a'}, detail: 'b'}, 'x'), m.errorMessage({detail: 'b'}, 'x'),
                m.errorMessage({detail: [{msg: 'field required'}]}, 'x'), m.errorMessage(null, 'x')];
    """,
    )
    assert out == ["a", "b", "field required", "x"]


def test_register_form_builds_the_registration_json(page: Any) -> None:
    family = run(
        page,
        "pages/register.js",
        """
        return m.familyFromForm({type: 'LLM', name: 'mine', description: 'd', langs: 'en, zh', contextLength: '4096',
            abilities: ['chat'], format: 'ggufv2', size: '0_5', quantizations: 'Q4_K_M, Q8_0', source: 'hub',
            uri: '', modelId: 'org/mine-gguf', fileTemplate: 'mine-{quantization}.gguf', chatTemplate: '{{ x }}',
            stop: '<|end|>', dimensions: '', persist: true});
    """,
    )
    assert family == {
        "model_name": "mine",
        "model_type": "LLM",
        "model_ability": ["chat"],
        "model_description": "d",
        "model_lang": ["en", "zh"],
        "context_length": 4096,
        "chat_template": "{{ x }}",
        "stop": ["<|end|>"],
        "model_specs": [
            {
                "model_format": "ggufv2",
                "model_size_in_billions": "0_5",
                "quantizations": ["Q4_K_M", "Q8_0"],
                "model_id": "org/mine-gguf",
                "model_file_name_template": "mine-{quantization}.gguf",
            }
        ],
    }
    # The same JSON is what the server validates: it must parse as a model family.
    from xinference.model.spec import ModelFamily

    assert ModelFamily.model_validate(family).model_name == "mine"


def test_model_page_picks_the_routes_model_or_the_first_serving_one(page: Any) -> None:
    out = run(
        page,
        "lib/model_page.js",
        """
        const models = [{model_uid: 'a', model_type: 'image', status: 'loading'},
                        {model_uid: 'b', model_type: 'rerank', status: 'degraded'},
                        {model_uid: 'c', model_type: 'embedding', status: 'ready'},
                        {model_uid: 'd', model_type: 'image', status: 'ready'}];
        const tryable = m.servingOf('embedding', 'rerank');
        return [models.filter(tryable).map((x) => x.model_uid), m.firstUid('', models, tryable),
                m.firstUid('a', models, tryable), m.firstUid('', models, m.servingOf('image')),
                m.firstUid('', models, m.servingOf('audio'))];
    """,
    )
    assert out == [["b", "c"], "b", "a", "d", ""]


def test_model_page_frames_the_try_out_pages(page: Any, ui_static: str) -> None:
    """The shared frame as the Embeddings & rerank page uses it: the note when no model fits, the first fitting model
    chosen and its part shown, and a choice in the picker going into the route. /v1/models answers from here."""
    listing: dict[str, Any] = {"data": []}
    page.route(f"{ui_static}/v1/models", lambda route: route.fulfill(json=listing))
    render = """
        const {render} = await import('preact');
        const {html} = await import('/lib/html.js');
        const box = document.createElement('div');
        document.body.replaceChildren(box);
        render(html`<${m.TryPage} arg="" />`, box);
        await new Promise((done) => setTimeout(done, 300));
    """
    empty = run(page, "pages/try.js", render + "return box.querySelector('.empty').textContent;")
    assert (
        " ".join(empty.split())
        == "No embedding or rerank model is ready. Launch one (all-MiniLM-L6-v2 ships with the install)."
    )
    listing["data"] = [
        {"model_uid": "img", "model_type": "image", "status": "ready"},
        {"model_uid": "rr", "model_type": "rerank", "status": "ready"},
        {"model_uid": "emb", "model_type": "embedding", "status": "ready"},
    ]
    chosen = run(
        page,
        "pages/try.js",
        render
        + """
        const picker = box.querySelector('[data-testid=model-picker]');
        const before = [picker.value, [...picker.options].map((o) => o.value), box.querySelector('#query') !== null,
                        box.querySelector('.empty') === null];
        picker.value = 'emb';
        picker.dispatchEvent(new Event('change'));
        await new Promise((done) => setTimeout(done, 100));
        return [...before, location.hash, box.querySelector('#inputs') !== null];
    """,
    )
    page.unroute(f"{ui_static}/v1/models")
    assert chosen == ["rr", ["rr", "emb"], True, True, "#/try/emb", True]


def test_cosine_similarity(page: Any) -> None:
    values = run(
        page,
        "pages/try.js",
        """
        return [m.cosine([1, 0], [1, 0]), m.cosine([1, 0], [0, 2]), m.cosine([1, 1], [-1, -1]),
                m.cosine([0, 0], [1, 1])];
    """,
    )
    assert values == [1, 0, -1, 0]


def test_recording_suffix_follows_the_recorders_mime_type(page: Any) -> None:
    suffixes = run(
        page,
        "pages/audio.js",
        """
        return ['audio/webm;codecs=opus', 'audio/ogg; codecs=opus', 'audio/mp4', '', 'audio/x-unknown']
          .map(m.recordingSuffix);
    """,
    )
    assert suffixes == ["webm", "ogg", "m4a", "webm", "webm"]


def test_request_sends_form_data_as_multipart_and_objects_as_json(page: Any, ui_static: str) -> None:
    seen: list[tuple[str, str]] = []

    def answer(route: Any) -> None:
        seen.append((route.request.headers.get("content-type", ""), route.request.post_data or ""))
        route.fulfill(status=200, body="{}", content_type="application/json")

    page.route(f"{ui_static}/echo", answer)
    run(
        page,
        "lib/api.js",
        """
        const form = new FormData();
        form.append('model', 'w');
        form.append('file', new Blob(['RIFF'], {type: 'audio/wav'}), 'a.wav');
        await m.request('/echo', {method: 'POST', body: form});
        await m.request('/echo', {method: 'POST', body: {model: 'w'}});
    """,
    )
    page.unroute(f"{ui_static}/echo")
    (form_type, form_body), (json_type, json_body) = seen
    assert form_type.startswith("multipart/form-data; boundary=")
    assert 'name="file"; filename="a.wav"' in form_body and 'name="model"' in form_body
    assert json_type == "application/json" and json_body == '{"model":"w"}'


def test_image_request_sends_only_what_the_form_sets(page: Any) -> None:
    bodies = run(
        page,
        "pages/images.js",
        """
        const base = {prompt: 'a fox', negative: '', size: 'auto', n: '2', steps: '', seed: ''};
        let bad = '';
        try { m.imageRequest('sd', {...base, size: 'big'}); } catch (e) { bad = e.message; }
        return [m.imageRequest('sd', base),
                m.imageRequest('sd', {...base, size: '512*256', steps: '4', seed: '0', negative: 'blur'}), bad];
    """,
    )
    assert bodies[0] == {"model": "sd", "prompt": "a fox", "n": 2, "response_format": "b64_json"}
    assert bodies[1] == {
        "model": "sd",
        "prompt": "a fox",
        "n": 2,
        "response_format": "b64_json",
        "size": "512x256",
        "num_inference_steps": 4,
        "seed": 0,
        "negative_prompt": "blur",
    }
    assert "not WIDTHxHEIGHT" in bodies[2]


# -- chat images --------------------------------------------------------------------------------------------------


def test_chat_image_content_and_limits(page: Any) -> None:
    result = run(
        page,
        "pages/chat_images.js",
        """
        const image = (name) => ({ name, size: 3, url: 'data:image/png;base64,AAA' });
        const eight = Array.from({ length: 8 }, (_, i) => image('i' + i));
        const png = new File(['x'], 'a.png', { type: 'image/png' });
        const read = await m.readImages([png, new File(['y'], 'b.gif', { type: 'image/gif' })]);
        let tooBig = null;
        try {
          await m.readImage({ name: 'huge.png', size: m.MAX_IMAGE_BYTES + 1 });
        } catch (err) {
          tooBig = err.message;
        }
        const capped = m.mergeImages(eight, { images: [image('x')], error: null });
        return {
          text: m.messageContent('hi', []),
          parts: m.messageContent('hi', [image('a')]),
          imageOnly: m.messageContent('', [image('a')]),
          sees: [m.canSee({ model_ability: ['chat', 'vision'] }), m.canSee({ model_ability: ['chat'] }),
                 m.canSee(undefined)],
          files: m.imageFiles([png, new File(['t'], 'n.txt', { type: 'text/plain' })]).map((f) => f.name),
          read: read.images.map((i) => [i.name, i.url.slice(0, 15)]),
          merged: m.mergeImages([image('a')], { images: [image('b')], error: null }).images.map((i) => i.name),
          capped: [capped.images.length, capped.error],
          tooBig,
        };
    """,
    )
    url = "data:image/png;base64,AAA"
    assert result["text"] == "hi"
    assert result["parts"] == [{"type": "image_url", "image_url": {"url": url}}, {"type": "text", "text": "hi"}]
    assert result["imageOnly"] == [{"type": "image_url", "image_url": {"url": url}}]
    assert result["sees"] == [True, False, False]
    assert result["files"] == ["a.png"]
    assert result["read"] == [["a.png", "data:image/png;"], ["b.gif", "data:image/gif;"]]
    assert result["merged"] == ["a", "b"]
    assert result["capped"] == [8, "a message may carry at most 8 images"]
    assert result["tooBig"] == "huge.png (20.0 MiB) is over the limit of 20.0 MiB for one image"
