package testservice_test

import (
	"fmt"
	"os"
	"os/exec"

	"github.com/tollgate/tollgate/internal/testservice"
)

// The service's knobs are environment variables (or flags); here it is
// told to exit at once with status 3, as a broken command would.
func ExamplePath() {
	bin, err := testservice.Path()
	if err != nil {
		fmt.Println(err)
		return
	}
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), testservice.EnvExit+"=3")
	fmt.Println(cmd.Run())
	// Output: exit status 3
}
