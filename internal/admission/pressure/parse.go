package pressure

import (
	"bufio"
	"bytes"
	"fmt"
	"strconv"
	"strings"
)

// ParsePSI reads a PSI file ("some avg10=1.23 avg60=… total=…" and
// "full …") and returns the avg10 of each line in basis points (1.23% =
// 123). A missing "full" line, as old kernels print for cpu, reads as 0.
func ParsePSI(data []byte) (someBP, fullBP int, err error) {
	seenSome := false
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 {
			continue
		}
		var avg10 string
		for _, f := range fields[1:] {
			if v, ok := strings.CutPrefix(f, "avg10="); ok {
				avg10 = v
			}
		}
		if avg10 == "" {
			return 0, 0, fmt.Errorf("PSI line %q has no avg10: %w", sc.Text(), ErrNoSignal)
		}
		bp, err := parseBasisPoints(avg10)
		if err != nil {
			return 0, 0, fmt.Errorf("PSI line %q: %w", sc.Text(), err)
		}
		switch fields[0] {
		case "some":
			someBP, seenSome = bp, true
		case "full":
			fullBP = bp
		}
	}
	if !seenSome {
		return 0, 0, fmt.Errorf("PSI data has no \"some\" line: %w", ErrNoSignal)
	}
	return someBP, fullBP, nil
}

// parseBasisPoints reads a percentage with up to two decimals, exactly.
func parseBasisPoints(s string) (int, error) {
	whole, frac, _ := strings.Cut(s, ".")
	if len(frac) > 2 {
		frac = frac[:2]
	}
	for len(frac) < 2 {
		frac += "0"
	}
	w, err1 := strconv.Atoi(whole)
	f, err2 := strconv.Atoi(frac)
	if err1 != nil || err2 != nil || w < 0 || w > 100 || f < 0 {
		return 0, fmt.Errorf("percentage %q: %w", s, ErrNoSignal)
	}
	return w*100 + f, nil
}

// ParseMeminfo returns MemTotal and MemAvailable from /proc/meminfo data,
// in bytes.
func ParseMeminfo(data []byte) (total, available int64, err error) {
	var haveTotal, haveAvail bool
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		key, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok || (key != "MemTotal" && key != "MemAvailable") {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) != 2 || fields[1] != "kB" {
			return 0, 0, fmt.Errorf("meminfo line %q: %w", sc.Text(), ErrNoSignal)
		}
		kb, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil || kb < 0 || kb > 1<<53 {
			return 0, 0, fmt.Errorf("meminfo line %q: %w", sc.Text(), ErrNoSignal)
		}
		if key == "MemTotal" {
			total, haveTotal = kb<<10, true
		} else {
			available, haveAvail = kb<<10, true
		}
	}
	if !haveTotal || !haveAvail {
		return 0, 0, fmt.Errorf("meminfo lacks MemTotal or MemAvailable: %w", ErrNoSignal)
	}
	return total, available, nil
}
