// Package pressure turns the host's pressure signals into the admission
// authority's pressure level: normal (the whole work capacity may be
// reserved), constrained (half of it) or critical (none).
//
// Controller is the hysteresis of DevGuard's pressure contract, unchanged:
// admission starts closed until the first valid sample; a soft signal must
// be seen in two consecutive samples before the level rises, while
// critical memory or disk closes admission at once; a repeated stall
// (two samples) is critical; recovery is one step per 30 seconds of clear
// samples without a gap; stale, replayed, future and invalid samples close
// admission. Existing reservations are never revoked: only the target for
// new ones moves.
//
// Monitor feeds the controller on Linux. It is event-driven where the
// kernel allows it: PSI triggers on memory and cpu wake it when a stall
// crosses a threshold. MemAvailable and free disk have no kernel
// notification, so a slow ticker (10 s) samples them, and the ticker is
// the only wake-up at all where the kernel refuses PSI triggers. Recovery
// timing needs a sample every 2 s, so the fast ticker runs only while the
// level is elevated or a soft signal awaits its second sample. An idle
// host costs one sample of a few file reads every 10 s.
//
// This package does not decide admissions; it only says how much of the
// capacity the authority may reserve now, and why.
package pressure
