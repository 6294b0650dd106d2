"""The API listing (what ``gradio_client``'s ``view_api()`` prints) reads as
documentation: every output is named after its component (no generated ``value_27``), no two
outputs of one endpoint share a name, no parameter is an enum of digit strings or labelled
``parameter_377`` (the language switch is "language"), and a value outside a choice's options
(the language, a strategy) is refused naming the argument and its options, never a bare HTTP
400."""

from __future__ import annotations

import re

import pytest
from gradio_client import utils as client_utils

from apps import ui as common


@pytest.fixture(scope="module", params=[a.name for a in common.APPS])
def api(request: pytest.FixtureRequest) -> tuple[str, dict]:
    mod = common.load_app(request.param)
    assert mod is not None
    return request.param, mod.build().get_api_info()


def _name(label: object) -> str:
    # the client names a value by its component label (gradio_client.utils)
    return client_utils.sanitize_parameter_names(str(label))


def test_every_public_endpoint_is_named_documentation(api):
    name, info = api
    endpoints = info["named_endpoints"]
    assert endpoints, f"{name}: no public endpoint"
    for ep, spec in endpoints.items():
        assert ep.startswith(f"/{name}_"), ep
        names = [_name(r["label"]) for r in spec["returns"]]
        generated = [n for n in names if re.fullmatch(r"value_\d+", n) or n in ("", "none")]
        assert not generated, f"{ep}: generated output names {generated}"
        dup = sorted({n for n in names if names.count(n) > 1})
        assert not dup, f"{ep}: outputs sharing a name {dup}"
        for p in spec["parameters"] + spec["returns"]:
            enum = p["type"].get("enum") if isinstance(p["type"], dict) else None
            if enum:
                assert not all(re.fullmatch(r"-?\d+", str(v)) for v in enum), (
                    f"{ep}: {p['label']} is an enum of digit strings {enum}"
                )
        params = [p["parameter_name"] for p in spec["parameters"]]
        assert params[-1:] == ["language"], f"{ep}: the language is the last input"
        labels = [str(p["label"]) for p in spec["parameters"]]
        assert labels[-1] == "language", f"{ep}: the switch's label is {labels[-1]!r}"
        generated = [x for x in labels if re.fullmatch(r"parameter_\d+", x)]
        assert not generated, f"{ep}: generated parameter labels {generated}"


def test_csv_buttons_name_their_figure():
    from apps.ui.page import Page
    from words.chunk_scan import MSG

    with __import__("gradio").Blocks():
        slot = Page("x", MSG).figure_slot("x-y", "n_agreement")
    assert slot.csv.label == "Download CSV (chunked vs recurrent)"
    assert _name(slot.csv.label) == "download_csv_chunked_vs_recurrent"


def test_a_bad_choice_names_the_argument():
    """Through ``gradio_client``: a language or a strategy outside the options is refused with
    a sentence naming the argument and its options, by the validator (a ``ValidationError``)
    or, on an endpoint without one, by the callback (an ``AppError``)."""
    from gradio_client import Client

    mod = common.load_app("prefix_replay")
    langs = "language must be one of ['English', '中文'], got 'French'"
    with common.launched(mod.build()) as url:
        c = Client(url, verbose=False)
        with pytest.raises(Exception, match=re.escape(f"- language: {langs}")):
            c.predict(language="French", api_name="/prefix_replay_batch")
        with pytest.raises(Exception, match=re.escape("- strategy: strategy must be one of [")):
            c.predict(strategy="nope", api_name="/prefix_replay_batch")
        with pytest.raises(Exception, match=re.escape(langs)):
            c.predict(language="French", api_name="/prefix_replay_reset")  # no validator
        out = c.predict(language="中文", api_name="/prefix_replay_reset")
        assert "空会话" in out[0]  # a known language still works
