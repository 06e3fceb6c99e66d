package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/big"
	"strings"
	"unicode"

	"github.com/dustin/go-humanize"
)

// errHelp is -h, -help or the help command: usage was printed on stdout,
// exit 0.
var errHelp = errors.New("help requested")

// parseFlags parses args with fs, flags and operands in any order as far
// as a "--", after which everything is an operand, and returns the
// operands. -h and -help print usage on stdout and return errHelp, and so
// does an operand "help" before any "--" (dio-check bench help; a
// directory named help is ./help, or after "--"); any other flag error
// comes back as a usageError carrying the synopsis, to be printed once.
func parseFlags(fs *flag.FlagSet, args []string, stdout io.Writer, usage func(io.Writer)) ([]string, error) {
	// The flag package prints its errors and the usage itself; we print
	// them once, and the usage asked for on stdout.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	var operands []string
	for {
		err := fs.Parse(args)
		if errors.Is(err, flag.ErrHelp) {
			usage(stdout)
			return nil, errHelp
		}
		if err != nil {
			return nil, badUsage(fs, err.Error())
		}
		// Parse stops at the first operand, or consumes a "--" and stops.
		rest := fs.Args()
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" && (n == 1 || !takesValue(fs, args[n-2])) {
			return append(operands, rest...), nil
		}
		if len(rest) == 0 {
			return operands, nil
		}
		if rest[0] == "help" {
			usage(stdout)
			return nil, errHelp
		}
		operands = append(operands, rest[0])
		args = rest[1:]
	}
}

// takesValue reports whether arg is a flag of fs that takes the next
// argument as its value (-size 1MiB; not -json, not -size=1MiB).
func takesValue(fs *flag.FlagSet, arg string) bool {
	name, ok := strings.CutPrefix(arg, "-")
	name = strings.TrimPrefix(name, "-")
	if !ok || strings.Contains(name, "=") {
		return false
	}
	f := fs.Lookup(name)
	return f != nil && !isBool(f)
}

// synopsis is the usage line of fs's command, every flag with its default,
// generated from fs so that it cannot omit one.
func synopsis(fs *flag.FlagSet) string {
	var b strings.Builder
	b.WriteString("usage: " + fs.Name())
	if fs.Name() == "dio-check" {
		b.WriteString(" [probe]") // the default command, which may be named
	}
	fs.VisitAll(func(f *flag.Flag) {
		name, _ := flag.UnquoteUsage(f)
		switch {
		case isBool(f) && f.DefValue == "false":
			fmt.Fprintf(&b, " [-%s]", f.Name)
		case isBool(f):
			fmt.Fprintf(&b, " [-%s=%s]", f.Name, f.DefValue)
		case f.DefValue == "":
			fmt.Fprintf(&b, " [-%s %s]", f.Name, name)
		default:
			fmt.Fprintf(&b, " [-%s %s]", f.Name, f.DefValue)
		}
	})
	b.WriteString(" " + operandsOf[fs.Name()])
	return b.String()
}

// operandsOf names what each command takes after its flags.
var operandsOf = map[string]string{
	"dio-check":          "DIR...",
	"dio-check bench":    "DIR",
	"dio-check pressure": "DIR",
}

func isBool(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// printFlags prints fs's synopsis and its flags with their defaults.
func printFlags(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprintln(w, synopsis(fs))
	fmt.Fprintln(w)
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
}

// sizeHelp is how a size flag is written, for the usage and the errors.
const sizeHelp = "bytes (134217728) or a number and a unit: KiB, MiB, GiB count powers of 1024 (128MiB, 1.5GiB); k, M, G, kB, MB, GB powers of 1000 (128MB is 128000000 bytes)"

// parseSize reads a positive byte count as people write it, with
// go-humanize's units: KiB, MiB, GiB (and Ki, Mi, Gi) are powers of 2,
// kB, MB, GB (and k, M, G) are powers of 10. It refuses 0, a size past an
// int64 (an error, not a wrap), and one that is not a whole number of
// bytes (1.5, 1.3KiB), which go-humanize would cut to one quietly.
func parseSize(s string) (int64, error) {
	if strings.HasPrefix(strings.TrimSpace(s), "-") {
		return 0, errors.New("negative: a size is a positive number of bytes")
	}
	n, err := humanize.ParseBytes(s)
	switch {
	// go-humanize says "too large: ..." for a size past a uint64.
	case err != nil && strings.HasPrefix(err.Error(), "too large"), err == nil && n > math.MaxInt64:
		return 0, errors.New("too large")
	case err != nil:
		return 0, errors.New("not a size: want " + sizeHelp)
	}
	// go-humanize multiplies a fraction by its unit in floating point
	// and drops what is left below a byte: redo it exactly.
	if num, unit := splitSize(s); strings.Contains(num, ".") {
		exact, ok := new(big.Rat).SetString(num)
		perUnit, err := humanize.ParseBytes("1" + unit)
		if !ok || err != nil {
			return 0, errors.New("not a size: want " + sizeHelp)
		}
		exact.Mul(exact, new(big.Rat).SetInt64(int64(perUnit)))
		if !exact.IsInt() && perUnit == 1 {
			return 0, errors.New("not a whole number of bytes")
		}
		if !exact.IsInt() {
			// A decimal times a whole unit has no more places than it.
			places := len(num) - strings.Index(num, ".") - 1
			return 0, fmt.Errorf("%s is %s bytes, not a whole number", s, strings.TrimRight(exact.FloatString(places), "0"))
		}
		if !exact.Num().IsInt64() {
			return 0, errors.New("too large")
		}
		n = exact.Num().Uint64()
	}
	if n == 0 {
		return 0, errors.New("not a positive size")
	}
	return int64(n), nil
}

// splitSize splits a size as go-humanize does: the number (its digits,
// points and commas, the commas dropped) and the unit after it.
func splitSize(s string) (num, unit string) {
	i := strings.IndexFunc(s, func(r rune) bool { return !unicode.IsDigit(r) && r != '.' && r != ',' })
	if i < 0 {
		i = len(s)
	}
	return strings.ReplaceAll(s[:i], ",", ""), s[i:]
}

// sizeName prints a byte count as the flags take it, in the largest
// binary unit it reaches: exactly where the unit divides it, else to a
// tenth of the unit. It is the one size formatter of dio-check's output.
// go-humanize, which parses the flags, does not print them: its IBytes
// writes "8.0 KiB" and "63 KiB" for 64000, with a space that a flag
// cannot take and a rounding that parseSize cannot take back.
func sizeName(n int64) string {
	units := []struct {
		name string
		size int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}}
	for _, u := range units {
		switch {
		case n < u.size:
			continue
		case n%u.size == 0:
			return fmt.Sprintf("%d%s", n/u.size, u.name)
		}
		return fmt.Sprintf("%.1f%s", float64(n)/float64(u.size), u.name)
	}
	if n == 0 {
		return "0"
	}
	return fmt.Sprintf("%dB", n)
}

// sizeValue is a size flag.
type sizeValue int64

func (v *sizeValue) String() string { return sizeName(int64(*v)) }

func (v *sizeValue) Set(s string) error {
	n, err := parseSize(s)
	if err == nil {
		*v = sizeValue(n)
	}
	return err
}

// sizesValue is a comma-separated list of sizes.
type sizesValue []int64

func (v *sizesValue) String() string {
	var names []string
	for _, n := range *v {
		names = append(names, sizeName(n))
	}
	return strings.Join(names, ",")
}

func (v *sizesValue) Set(s string) error {
	var out []int64
	for _, part := range strings.Split(s, ",") {
		n, err := parseSize(strings.TrimSpace(part))
		if err != nil {
			return err
		}
		out = append(out, n)
	}
	*v = out
	return nil
}
