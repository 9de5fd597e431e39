//go:build !linux

package isolation

func landlockABI() (int, error) {
	return 0, fsUnavailable("Landlock is a Linux feature")
}
