//go:build !linux

package cgroup

import "os"

func readFile(path string) ([]byte, error) {
	return os.ReadFile(path)
}

func writeFile(path, value string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return err
	}
	_, werr := f.Write([]byte(value))
	cerr := f.Close()
	if werr != nil {
		return werr
	}
	return cerr
}
