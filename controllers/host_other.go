//go:build !linux

package controllers

import (
	"errors"
	"fmt"

	"github.com/marshal-dev/marshal/api/v1alpha1"
)

// measureHost fails: measuring memory and tasks needs Linux's /proc.
func measureHost() (v1alpha1.Amounts, error) {
	return v1alpha1.Amounts{}, fmt.Errorf("measuring the host needs Linux: %w", errors.ErrUnsupported)
}
