# benchcmp.awk prints every figure of a `go test -bench` run beside the
# same figure of an earlier run:
#
#   awk -f benchcmp.awk [OLD] NEW
#
# one line per benchmark and unit, in the order NEW reports them: the
# earlier value ("-" when OLD lacks it, or is not given), the new one, and
# the change in percent.
FILENAME == ARGV[1] && ARGC == 3 { earlier = 1 }
FILENAME != ARGV[1] || ARGC == 2 { earlier = 0 }
$1 ~ /^Benchmark/ && NF >= 4 {
	name = $1
	sub(/-[0-9]+$/, "", name)
	for (i = 3; i + 1 <= NF; i += 2) {
		key = name " " $(i + 1)
		if (earlier) {
			old[key] = $i
			continue
		}
		if (!(key in now)) {
			order[++n] = key
		}
		now[key] = $i
	}
}
END {
	if (n == 0) {
		exit
	}
	printf "%-44s %-36s %12s %12s %8s\n", "benchmark", "unit", "previous", "now", "change"
	for (k = 1; k <= n; k++) {
		key = order[k]
		split(key, part, " ")
		prev = "-"
		change = ""
		if (key in old) {
			prev = old[key]
			if (old[key] + 0 != 0) {
				change = sprintf("%+.0f%%", (now[key] - old[key]) * 100 / old[key])
			}
		}
		printf "%-44s %-36s %12s %12s %8s\n", part[1], part[2], prev, now[key], change
	}
}
