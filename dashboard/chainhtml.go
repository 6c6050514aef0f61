package dashboard

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"strings"
)

// WriteChainHTML writes the chain view of ch as one self-contained HTML
// file (`skiff trace pod NAME -o html`): the page's CSS and JavaScript
// inlined, the chain embedded as JSON, nothing fetched from anywhere, so
// it opens from a USB stick on a slide or in a homework submission.
func WriteChainHTML(w io.Writer, ch *Chain) error {
	css, err := assets.ReadFile("assets/static/style.css")
	if err != nil {
		return fmt.Errorf("chain html: %w", err)
	}
	js, err := assets.ReadFile("assets/static/app.js")
	if err != nil {
		return fmt.Errorf("chain html: %w", err)
	}
	data, err := json.Marshal(ch)
	if err != nil {
		return fmt.Errorf("chain html: encode the chain: %w", err)
	}
	title := "skiff trace"
	if ch.Pod != nil {
		title = "skiff trace pod " + ch.Pod.Namespace + "/" + ch.Pod.Name
	}
	var b bytes.Buffer
	err = chainPage.Execute(&b, map[string]any{
		"Title": title,
		// html/template escapes what goes in <style> and <script>
		// content by context; the assets are ours and the data is JSON
		// made safe for a script element below.
		"CSS":  template.CSS(css),
		"JS":   template.JS(strings.ReplaceAll(string(js), "</script", `<\/script`)),
		"Data": template.JS(safeScriptJSON(data)),
	})
	if err != nil {
		return fmt.Errorf("chain html: %w", err)
	}
	_, err = w.Write(b.Bytes())
	return err
}

// safeScriptJSON makes JSON safe inside a <script> element: no "<", ">"
// or "&" that could end it or start a comment (the JSON stays the same).
func safeScriptJSON(b []byte) string {
	var out bytes.Buffer
	json.HTMLEscape(&out, b)
	return out.String()
}

var chainPage = template.Must(template.New("chain").Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}}</title>
<style>{{.CSS}}</style>
</head>
<body>
<header><span class="brand">skiff</span><span class="dim">{{.Title}}</span><span id="live" class="live"></span><button id="lang" type="button" aria-label="language / 语言">中文</button></header>
<main id="main"></main>
<script type="application/json" id="skiff-chain">{{.Data}}</script>
<script>{{.JS}}</script>
</body>
</html>
`))
