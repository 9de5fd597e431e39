package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// bashCompletion is a bash script that loads marshalctl's completion the
// way a user's shell does, simulates TAB on the words in $WORDS, and
// prints what bash would offer, one a line.
const bashCompletion = `
if [[ -r /usr/share/bash-completion/bash_completion ]]; then
	source /usr/share/bash-completion/bash_completion
fi
if ! declare -F _get_comp_words_by_ref >/dev/null; then
	# The bash-completion package is absent: its word splitter, for
	# words without quotes or word breaks, is all the script needs.
	_get_comp_words_by_ref() {
		cur=${COMP_WORDS[COMP_CWORD]}
		prev=${COMP_WORDS[COMP_CWORD-1]}
		words=("${COMP_WORDS[@]}")
		cword=$COMP_CWORD
	}
fi
source <(marshalctl completion bash)
read -r -a COMP_WORDS <<<"$WORDS"
[[ $WORDS == *" " ]] && COMP_WORDS+=("")
COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
COMP_LINE=$WORDS
COMP_POINT=${#COMP_LINE}
__start_marshalctl 2>/dev/null
printf '%s\n' "${COMPREPLY[@]}"
`

// TestBashCompletesFromDaemon builds marshalctl and completes in a real
// bash through the generated script, against a real API server: the
// script, the binary's __complete and the daemon's answer together.
func TestBashCompletesFromDaemon(t *testing.T) {
	if testing.Short() {
		t.Skip("builds marshalctl")
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("needs bash")
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("needs the go command to build marshalctl")
	}
	bin := t.TempDir()
	build := exec.CommandContext(t.Context(), gobin, "build", "-o", bin, "github.com/marshal-dev/marshal/cmd/marshalctl")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building marshalctl: %v\n%s", err, out)
	}
	h := newHarness(t).withFixture()

	tests := []struct {
		name  string
		words string
		want  []string
	}{
		{name: "workspace_names", words: "marshalctl --socket " + h.socket + " get workspaces ", want: []string{"docs", "webapp"}},
		{name: "one_profile_name", words: "marshalctl --socket " + h.socket + " describe profile w", want: []string{"writer"}},
		{name: "event_object", words: "marshalctl --socket " + h.socket + " events --for ws/w", want: []string{"ws/webapp"}},
		{name: "output_format", words: "marshalctl get profiles -o y", want: []string{"yaml"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.CommandContext(t.Context(), bash, "--norc", "--noprofile", "-c", bashCompletion)
			cmd.Env = append(os.Environ(), "PATH="+bin+string(filepath.ListSeparator)+os.Getenv("PATH"), "WORDS="+tc.words)
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("bash: %v", err)
			}
			got := strings.Fields(string(out))
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("TAB after %q offers %q, want %q", tc.words, got, tc.want)
			}
		})
	}
}
