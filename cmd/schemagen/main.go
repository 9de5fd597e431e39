package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"syscall"
)

func main() {
	root := flag.String("root", ".", "the module root, where go.mod is")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *root); err != nil {
		fmt.Fprintln(os.Stderr, "schemagen:", err)
		os.Exit(1)
	}
}

// run writes every generated file under root that is missing or differs,
// and names the files in the output directory it no longer generates.
func run(ctx context.Context, root string) error {
	out, err := generate(ctx, root)
	if err != nil {
		return err
	}
	for _, name := range slices.Sorted(maps.Keys(out)) {
		if err := ctx.Err(); err != nil {
			return err
		}
		p := filepath.Join(root, filepath.FromSlash(name))
		if old, err := os.ReadFile(p); err == nil && bytes.Equal(old, out[name]) {
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, out[name], 0o644); err != nil {
			return err
		}
		fmt.Println("wrote", name)
	}
	stale, err := staleFiles(root, out)
	if err != nil {
		return err
	}
	for _, name := range stale {
		fmt.Fprintf(os.Stderr, "schemagen: %s is no longer generated: delete it\n", name)
	}
	if len(stale) > 0 {
		return fmt.Errorf("%d stale files in %s", len(stale), outDir)
	}
	return nil
}

// staleFiles lists the files in the output directory that generate does
// not produce, relative to root.
func staleFiles(root string, out files) ([]string, error) {
	var stale []string
	dir := filepath.Join(root, filepath.FromSlash(outDir))
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		if _, ok := out[filepath.ToSlash(rel)]; !ok {
			stale = append(stale, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	return stale, nil
}
