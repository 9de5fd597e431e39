package localapi

import (
	"errors"
	"path/filepath"
)

// Directories of system mode.
const (
	SystemConfigDir = "/etc/marshal/manifests.d"
	SystemStateDir  = "/var/lib/marshal"
)

// DefaultDirsFor returns marshald's config and state dirs for the user
// euid without flags: SystemConfigDir and SystemStateDir for root, else
// marshal/manifests.d in $XDG_CONFIG_HOME and marshal in $XDG_STATE_HOME,
// each defaulting below $HOME as the XDG base directories do. marshald
// uses it, and marshalctl doctor looks where it says.
func DefaultDirsFor(euid int, getenv func(string) string) (config, state string, err error) {
	if euid == 0 {
		return SystemConfigDir, SystemStateDir, nil
	}
	home := getenv("HOME")
	configHome, stateHome := getenv("XDG_CONFIG_HOME"), getenv("XDG_STATE_HOME")
	if configHome == "" || stateHome == "" {
		if home == "" {
			return "", "", errors.New("neither XDG_CONFIG_HOME/XDG_STATE_HOME nor HOME is set: pass --config-dir and --state-dir")
		}
		if configHome == "" {
			configHome = filepath.Join(home, ".config")
		}
		if stateHome == "" {
			stateHome = filepath.Join(home, ".local", "state")
		}
	}
	return filepath.Join(configHome, "marshal", "manifests.d"), filepath.Join(stateHome, "marshal"), nil
}
