"""The browser tests' fixtures: a Streamlit server on the tiny model, headless Chromium and a page that fails the test
if a dialog opens (defined in `support.browser`)."""

from support.browser import browser, page, server  # noqa: F401  (fixtures)
