package cli

import (
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/marshal-dev/marshal/cmd/marshalctl/internal/runner"
	"github.com/marshal-dev/marshal/internal/quantity"
)

// timeNow is the clock ages are measured on; tests fix it.
var timeNow = time.Now

// columnGap separates table columns, as in kubectl.
const columnGap = "   "

// table aligns rows under a header. A row may have fewer cells than the
// header; a watch prints rows one at a time with the widths known so far.
type table struct {
	header []string
	widths []int
}

func newTable(header ...string) *table {
	t := &table{header: header}
	t.fit(header)
	return t
}

// fit widens the columns to hold row.
func (t *table) fit(row []string) {
	for i, cell := range row {
		if i >= len(t.widths) {
			t.widths = append(t.widths, 0)
		}
		t.widths[i] = max(t.widths[i], utf8.RuneCountInString(cell))
	}
}

// format returns row as one line, every cell but the last padded to its
// column.
func (t *table) format(row []string) string {
	var b strings.Builder
	last := len(row) - 1
	for last >= 0 && row[last] == "" {
		last--
	}
	for i := 0; i <= last; i++ {
		b.WriteString(row[i])
		if i < last {
			b.WriteString(strings.Repeat(" ", t.widths[i]-utf8.RuneCountInString(row[i])))
			b.WriteString(columnGap)
		}
	}
	b.WriteByte('\n')
	return b.String()
}

// write prints the header and rows, aligned, each line prefixed with
// indent.
func (t *table) write(w io.Writer, indent string, rows [][]string) error {
	for _, r := range rows {
		t.fit(r)
	}
	var b strings.Builder
	b.WriteString(indent + t.format(t.header))
	for _, r := range rows {
		b.WriteString(indent + t.format(r))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// age is how long ago t was, in kubectl's short form: 4s, 3m, 2h, 5d, 1y.
func age(t time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	d := timeNow().Sub(t)
	switch {
	case d < 0:
		return "0s"
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d/time.Minute))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d/time.Hour))
	case d < 365*24*time.Hour:
		return fmt.Sprintf("%dd", int(d/(24*time.Hour)))
	}
	return fmt.Sprintf("%dy", int(d/(365*24*time.Hour)))
}

// seen is an event's age with its count: "4s", or "4s (x3 over 2m)".
func seen(count int64, first, last time.Time) string {
	if count <= 1 {
		return age(last)
	}
	return fmt.Sprintf("%s (x%d over %s)", age(last), count, age(first))
}

// cpu writes thousandths of a core: "2" for 2000, "250m" for 250.
func cpu(milli int64) string {
	if milli%1000 == 0 {
		return fmt.Sprintf("%d", milli/1000)
	}
	return fmt.Sprintf("%dm", milli)
}

// bytesIEC writes a byte count in binary units: "4GiB", "412MiB",
// "1.5KiB", as marshald's refusals do.
func bytesIEC(n int64) string { return quantity.Bytes(n) }

// orDash writes "-" for an empty value.
func orDash(s string) string { return runner.OrDash(s) }

// firstLine is s up to its first newline.
func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
