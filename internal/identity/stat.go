package identity

import (
	"bytes"
	"errors"
	"strings"
)

// StatFields returns the fields of a /proc/<pid>/stat (or task stat) line
// from field 3, the state, on: fields[0] is field 3, fields[n] is field
// n+3. The command name, field 2, may hold spaces and parentheses itself,
// so fields are counted after its last ')'.
func StatFields(data []byte) ([]string, error) {
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return nil, errors.New("stat line without a command name")
	}
	return strings.Fields(string(data[i+1:])), nil
}
