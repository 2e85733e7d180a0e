"""The diagnosis report: one self-contained HTML page, a markdown summary, a terminal summary.

``render_html(analysis, *, worst_step=False)``, ``render_markdown(analysis)`` and
``terminal_summary(analysis, html_path=None)`` return strings (see ``docs/report.md``).
"""
from .render import render_html, render_markdown, terminal_summary

__all__ = ["render_html", "render_markdown", "terminal_summary"]
