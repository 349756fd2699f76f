package liveview

import (
	"embed"
	"io/fs"
)

//go:embed ui
var ui embed.FS

// Files returns the live page's static files (index.html, live.css,
// live.js), for a gateway to serve under one prefix with
// http.FileServerFS. The page draws the JSON endpoints under
// /v1/admin/live/ and holds no data of its own.
func Files() fs.FS {
	sub, err := fs.Sub(ui, "ui")
	if err != nil {
		panic(err) // "ui" is a valid path: fs.Sub cannot fail
	}
	return sub
}
