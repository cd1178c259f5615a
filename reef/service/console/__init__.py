"""The web console's files: `index.html`, `console.css` and plain ES modules (`*.js`), shipped as package data.

Why a small static page and not server-rendered pages or htmx: the console must show only what the public,
token-guarded JSON routes give a script. Server-rendered pages (or htmx, which swaps in HTML fragments) would need
the server to render data into HTML behind routes of their own, a second surface to guard and keep in step with
the API. A static page that calls the JSON routes itself, with the operator's token in a header, is built on
exactly the routes a script uses, and its files hold no data, so they are served without a token. Plain
JavaScript modules need no bundler, no Node toolchain and no vendored framework: the wheel carries the source the
browser runs. Charts are inline SVG built in `curve.js`; diffs come from the line diff in `diff.js`.
"""
