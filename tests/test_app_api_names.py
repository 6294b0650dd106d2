"""The API listing (what ``gradio_client``'s ``view_api()`` prints) reads as
documentation: every output is named after its component (no generated ``value_27``), no two
outputs of one endpoint share a name, and no parameter is an enum of digit strings."""

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


def test_csv_buttons_name_their_figure():
    from apps.ui.page import Page
    from words.chunk_scan import MSG

    with __import__("gradio").Blocks():
        slot = Page("x", MSG).figure_slot("x-y", "n_agreement")
    assert slot.csv.label == "Download CSV (chunked vs recurrent)"
    assert _name(slot.csv.label) == "download_csv_chunked_vs_recurrent"
