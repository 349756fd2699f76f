package yamlfield_test

import (
	"fmt"

	"go.yaml.in/yaml/v3"

	"github.com/tollgate/tollgate/internal/yamlfield"
)

func Example() {
	data := []byte("name: orders\ncapacity: 5\nrefil: 2\n")
	root, ferr := yamlfield.DecodeOne("orders.yaml", data)
	if ferr != nil {
		fmt.Println(ferr)
		return
	}
	w := yamlfield.Walker{File: "orders.yaml"}
	w.Fields(root, "", map[string]yamlfield.FieldFunc{
		"name":     func(_, _ *yaml.Node, _ string) {},
		"capacity": func(_, _ *yaml.Node, _ string) {},
		"refill":   func(_, _ *yaml.Node, _ string) {},
	})
	fmt.Println(w.Errs)
	// Output: orders.yaml:3:1: refil: unknown field, did you mean "refill"? (known: capacity, name, refill)
}
