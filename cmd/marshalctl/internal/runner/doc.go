// Package runner is marshalctl run's launch: the one request to
// marshald, then the exec of the plan or the refusal's report, with the
// exit statuses and errors every marshalctl command shares. It is apart
// from the commands (package cli) and links none of them, their YAML or
// their printers: a launch starts a marshalctl each time, and what that
// program links is part of what every launch costs.
package runner
