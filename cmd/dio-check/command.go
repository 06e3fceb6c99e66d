package main

import (
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
)

// commands are the subcommands a user types, for the suggestion a typo
// gets.
var commands = []string{"probe", "bench", "pressure", "help"}

// misspelt returns the command that arg, dio-check's first argument, was
// meant to be, if it looks like a typo of one: it is no flag, names
// nothing that exists (a directory called "bnech" is probed, as asked),
// and is one edit from a command of up to 5 letters or two from a longer
// one, counting a swap of neighbours as one edit ("bnech" is bench).
// Without this, "dio-check bnech /tmp" probed /tmp, then failed with
// "stat bnech: no such file or directory".
func misspelt(arg string) (string, bool) {
	if arg == "" || strings.HasPrefix(arg, "-") || strings.ContainsRune(arg, os.PathSeparator) {
		return "", false
	}
	if _, err := os.Lstat(arg); !os.IsNotExist(err) {
		return "", false
	}
	for _, cmd := range commands {
		limit := 1
		if len(cmd) > 5 {
			limit = 2
		}
		if arg != cmd && editDistance(strings.ToLower(arg), cmd) <= limit {
			return cmd, true
		}
	}
	return "", false
}

// editDistance is the optimal string alignment distance between a and b:
// insertions, deletions, substitutions and swaps of adjacent letters,
// each one edit (Damerau's typing errors).
func editDistance(a, b string) int {
	x, y := []rune(a), []rune(b)
	d := make([][]int, len(x)+1)
	for i := range d {
		d[i] = make([]int, len(y)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(x); i++ {
		for j := 1; j <= len(y); j++ {
			cost := 1
			if x[i-1] == y[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && x[i-1] == y[j-2] && x[i-2] == y[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(x)][len(y)]
}

// version is what -version prints: the module version the binary was
// built from ("(devel)" for a build inside the repository, as the go
// command says), the commit where the build recorded one, and the Go
// toolchain.
func version() string {
	v, rev := "(devel)", ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Version != "" {
			v = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch {
			case s.Key == "vcs.revision" && len(s.Value) >= 12:
				rev = s.Value[:12] + rev
			case s.Key == "vcs.modified" && s.Value == "true":
				rev += "+dirty"
			}
		}
	}
	if rev != "" {
		v += " " + rev
	}
	return fmt.Sprintf("dio-check %s %s %s/%s", v, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
