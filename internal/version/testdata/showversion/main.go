// Command showversion prints version.Get as JSON, for the linker test.
package main

import (
	"encoding/json"
	"os"

	"github.com/marshal-dev/marshal/internal/version"
)

func main() {
	json.NewEncoder(os.Stdout).Encode(version.Get())
}
