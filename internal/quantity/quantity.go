package quantity

import "fmt"

// Bytes writes n bytes in the largest IEC unit that keeps a whole part:
// "512B", "256MiB", "1.5GiB", "120GiB" (a tenth below 100 of a unit,
// none above, none when whole).
func Bytes(n int64) string {
	units := []string{"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	if n < 1024 {
		return fmt.Sprintf("%dB", n)
	}
	v := float64(n)
	unit := ""
	for _, u := range units {
		if v < 1024 {
			break
		}
		v /= 1024
		unit = u
	}
	switch {
	case v == float64(int64(v)):
		return fmt.Sprintf("%d%s", int64(v), unit)
	case v >= 100:
		return fmt.Sprintf("%.0f%s", v, unit)
	}
	return fmt.Sprintf("%.1f%s", v, unit)
}
