"""Issue 49, page details without a browser: evidence tables name a kernel by its short name (the
full C++ signature on hover and in the JSON), the folder index wraps file names between their
parts, and ``nsysdoc report`` of several captures prints the index page's path."""
from __future__ import annotations

import pytest

from nsysdoc.views import columns
from nsysdoc.views.build import _evidence
from nsysdoc.views.index_page import IndexRow, render_index_html, wrap_points

from .conftest import run_cli

#: the under-filled-GPU table's first row on HTA's A100 rank (kineto/hta_a100_rank3of8, 396 characters)
REDUCE = ("void at::native::reduce_kernel<128, 4, at::native::ReduceOp<float, at::native::func_wrapper_t<float, "
          "at::native::sum_functor<float, float, float>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, "
          "unsigned int, float, 4> >(at::native::ReduceOp<float, at::native::func_wrapper_t<float, "
          "at::native::sum_functor<float, float, float>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, "
          "unsigned int, float, 4>)")
#: a generic shortName (Kernel): named by its template argument, as in the kernels table
CUTLASS = ("void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64_32x6_tn_align4>"
           "(cutlass_80_tensorop_s1688gemm_64x64_32x6_tn_align4::Params)")


def test_kernel_signature_cell_shows_its_short_name_with_the_signature_on_hover():
    # the function's own name: no return type, namespaces, template or parameter lists
    assert columns.short_cell("name", REDUCE) == ("reduce_kernel", REDUCE)
    assert columns.short_cell("waiting_op", REDUCE) == ("reduce_kernel", REDUCE)
    # shortName "Kernel" is generic: cutlass:: + Kernel + its first template argument
    assert columns.short_cell("name", CUTLASS) == \
        ("cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64_32x6_tn_align4>", CUTLASS)


def test_names_that_are_not_signatures_stay_as_they_are():
    # a step, an NVTX range with a parenthesis, an already short kernel name, a number, a non-name column
    assert columns.short_cell("name", "ProfilerStep#3") == ("ProfilerStep#3", "")
    assert columns.short_cell("name", "forward (layer 1)") == ("forward (layer 1)", "")
    assert columns.short_cell("name", "vectorized_elementwise_kernel") == ("vectorized_elementwise_kernel", "")
    assert columns.short_cell("count", 162) == ("162", "")
    assert columns.short_cell("api", "void f<int>(int)") == ("void f<int>(int)", "")


def test_a_short_name_longer_than_80_characters_is_cut_with_an_ellipsis():
    long_name = "void " + "k" * 100 + "(int)"  # short name: 100 k's -> 79 k's + "…" (80 characters)
    text, title = columns.short_cell("name", long_name)
    assert text == "k" * 79 + "…" and len(text) == 80 and title == long_name


def test_evidence_table_keeps_one_title_per_cell():
    ev = _evidence({"title": "Kernels that cannot fill the GPU", "columns": ["name", "blocks", "time_ms"],
                    "rows": [[REDUCE, 2, 2.79], ["ProfilerStep#1", 1, 0.5]]})
    assert ev.rows == [["reduce_kernel", "2", "2.79"], ["ProfilerStep#1", "1", "0.500"]]
    assert ev.titles == [[REDUCE, "", ""], ["", "", ""]]


def test_page_shows_the_short_name_and_the_signature_on_hover(tmp_path):
    from html import unescape

    from tests.test_report_browser import _render_page

    finding = {"rule": "under-filled-gpu", "severity": "warning", "title": "Kernels that cannot fill the GPU",
               "message": "m", "source": "builtin",
               "evidence": {"title": "Kernels", "columns": ["name", "count"], "rows": [[REDUCE, 162]]}}
    page, a = _render_page(tmp_path, [finding])
    html = page.read_text(encoding="utf-8")
    art = html[html.index('data-rule="under-filled-gpu"'):]
    art = art[:art.index("</article>")]
    cell = art[art.index('<td class="kname"'):]
    cell = cell[:cell.index("</td>")]
    assert unescape(cell.split('title="')[1].split('"')[0]) == REDUCE
    assert cell.endswith(">reduce_kernel")
    # the JSON keeps the full signature
    assert a.result["findings"][0]["evidence"]["rows"][0][0] == REDUCE


def test_index_wraps_file_names_between_their_parts():
    assert wrap_points("rank_3-of.sqlite") == "rank_<wbr>3-<wbr>of.<wbr>sqlite"
    # escaped first: a name never adds markup ('<' and '&' are not wrap points)
    assert wrap_points("a<b>&c.x") == "a&lt;b&gt;&amp;c.<wbr>x"
    page = render_index_html([IndexRow(input="traces/fastvideo_h100x2.sqlite", verdict="v", link="x.html",
                                       link_text="fastvideo_h100x2.nsysdoc.html")])
    assert "traces/<wbr>fastvideo_<wbr>h100x2.<wbr>sqlite" in page
    assert ">fastvideo_<wbr>h100x2.<wbr>nsysdoc.<wbr>html</a>" in page
    assert "td.file, td.file a { overflow-wrap: break-word; word-break: normal; }" in page


@pytest.mark.slow  # issue 50: report commands in processes (1 s of CPU); .ci/run runs it
def test_report_of_several_captures_prints_the_index_path(tmp_path):
    from tests.test_perfetto import _tiny

    _tiny(tmp_path / "a.sqlite")
    _tiny(tmp_path / "b.sqlite")
    out = tmp_path / "out"
    proc = run_cli("report", "--no-cache", "--no-config", tmp_path / "a.sqlite", tmp_path / "b.sqlite", "-o", f"{out}/")
    assert proc.returncode in (0, 1), proc.stderr
    assert (out / "index.html").is_file()
    assert f"nsysdoc: wrote {out / 'index.html'}" in proc.stderr.splitlines()


def test_a_hostile_signature_is_escaped_in_the_cell_and_its_title(tmp_path):
    from tests.test_report_browser import _render_page

    evil = 'void ns::k<"><script>alert(1)</script>>(int)'
    assert columns.short_cell("name", evil)[1] == evil  # whatever the short name, the title is the signature
    finding = {"rule": "under-filled-gpu", "severity": "warning", "title": "t", "message": "m", "source": "builtin",
               "evidence": {"title": "Kernels", "columns": ["name"], "rows": [[evil]]}}
    html = _render_page(tmp_path, [finding])[0].read_text(encoding="utf-8")
    assert "<script>alert(1)" not in html
    assert 'title="void ns::k&lt;&#34;&gt;&lt;script&gt;alert(1)&lt;/script&gt;&gt;(int)">' in html
