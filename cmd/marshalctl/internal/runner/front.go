package runner

import "strings"

// ParseFront reads the command lines of marshalctl run that its front
// runs itself: global --socket, then run with -w/--workspace, --pty,
// --no-pty and --socket, then the agent's argv, after "--" or from the
// first argument that is not a flag. Every other command line (other
// commands, help, any other flag or form of one, a run without argv) is
// not the front's: ok is false, and the whole CLI reads it. What the
// front takes it reads as the whole CLI does.
func ParseFront(args []string) (o Options, argv []string, ok bool) {
	value := func(i int) (string, bool) {
		if i+1 < len(args) {
			return args[i+1], true
		}
		return "", false
	}
	i := 0
	for ; i < len(args) && args[i] != "run"; i++ {
		switch a := args[i]; {
		case a == "--socket":
			if o.Socket, ok = value(i); !ok {
				return Options{}, nil, false
			}
			i++
		case strings.HasPrefix(a, "--socket="):
			o.Socket = strings.TrimPrefix(a, "--socket=")
		default:
			return Options{}, nil, false
		}
	}
	if i == len(args) {
		return Options{}, nil, false
	}
	for i++; i < len(args); i++ {
		switch a := args[i]; {
		case a == "--":
			argv = args[i+1:]
		case a == "-w" || a == "--workspace" || a == "--socket":
			v, ok := value(i)
			if !ok {
				return Options{}, nil, false
			}
			if a == "--socket" {
				o.Socket = v
			} else {
				o.Workspace = v
			}
			i++
			continue
		case strings.HasPrefix(a, "--workspace="):
			o.Workspace = strings.TrimPrefix(a, "--workspace=")
			continue
		case strings.HasPrefix(a, "--socket="):
			o.Socket = strings.TrimPrefix(a, "--socket=")
			continue
		case a == "--pty":
			o.PTY = true
			continue
		case a == "--no-pty":
			o.NoPTY = true
			continue
		case strings.HasPrefix(a, "-"):
			return Options{}, nil, false
		default:
			argv = args[i:]
		}
		break
	}
	if len(argv) == 0 {
		return Options{}, nil, false
	}
	return o, argv, true
}
