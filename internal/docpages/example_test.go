package docpages_test

import (
	"fmt"
	"strings"

	"github.com/tollgate/tollgate/internal/docpages"
)

// A section is found by its heading, on whichever page holds it.
func ExampleSection() {
	pages := []docpages.Page{
		{Name: "README.md", Text: "# tollgate\n\nintro\n\n## Try it\n\ncurl …\n"},
		{Name: "docs/replay.md", Text: "# replay\n\n```sh\ntollgate replay logs/\n# a comment\n```\n\n## Formats\n\nCloudTrail\n"},
	}
	page, text, ok := docpages.Section(pages, "replay")
	fmt.Println(page, ok, strings.TrimSpace(text))
	// Output:
	// docs/replay.md true ```sh
	// tollgate replay logs/
	// # a comment
	// ```
}
