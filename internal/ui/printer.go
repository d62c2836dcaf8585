package ui

import (
	"fmt"
	"io"
	"strings"

	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/lipgloss/table"
	"github.com/muesli/termenv"

	"github.com/flecht-dev/flecht/internal/textfmt"
)

// Printer renders one result in the format the user chose.
type Printer struct {
	IO     *IOStreams
	Format Format
}

// NewPrinter returns a printer for the given streams and format.
func NewPrinter(io *IOStreams, f Format) *Printer { return &Printer{IO: io, Format: f} }

// Print writes v as JSON or YAML, or calls human for the table format.
// v must carry json tags with snake_case names: they are the stable schema.
func (p *Printer) Print(v any, human func(h *Human) error) error {
	switch p.Format {
	case FormatJSON:
		return writeJSON(p.IO.Out, v)
	case FormatYAML:
		return writeYAML(p.IO.Out, v)
	default:
		return human(p.Human())
	}
}

// PrintStream writes one result of a stream (a --watch refresh) for
// scripts: JSON as one compact line, so line-based tools read each refresh
// as it comes, YAML as one "---" document. The table format has no stream
// form; its caller draws frames itself.
func (p *Printer) PrintStream(v any) error {
	switch p.Format {
	case FormatJSON:
		return writeJSONLine(p.IO.Out, v)
	case FormatYAML:
		if _, err := io.WriteString(p.IO.Out, "---\n"); err != nil {
			return err
		}
		return writeYAML(p.IO.Out, v)
	default:
		return fmt.Errorf("format %q has no stream form", p.Format)
	}
}

// Human returns the writer for the human format on standard output.
func (p *Printer) Human() *Human { return NewHuman(p.IO.Out, p.IO.ColorEnabled()) }

// Human writes styled text for people: tables, key/value blocks, notes.
type Human struct {
	w io.Writer
	r *lipgloss.Renderer
	// styled holds what the style methods rendered with escape codes, so
	// that a table cell keeps Human's own colours while escape codes that
	// come with data are shown escaped.
	styled map[string]bool
}

// NewHuman returns a human writer on w, with or without colour.
func NewHuman(w io.Writer, color bool) *Human {
	r := lipgloss.NewRenderer(w)
	if color {
		r.SetColorProfile(termenv.ANSI256)
	} else {
		r.SetColorProfile(termenv.Ascii)
	}
	return &Human{w: w, r: r, styled: map[string]bool{}}
}

// Writer is the underlying writer, for free-form text.
func (h *Human) Writer() io.Writer { return h.w }

// Printf writes formatted text, made safe for a terminal as Text makes
// it: what the style methods rendered keeps its escape codes, every other
// control (one that came with data) is shown escaped.
func (h *Human) Printf(format string, args ...any) {
	io.WriteString(h.w, h.keepStyles(fmt.Sprintf(format, args...), textfmt.Text))
}

// Bold renders s in bold (plain without colour).
func (h *Human) Bold(s string) string { return h.style(h.r.NewStyle().Bold(true), s) }

// Faint renders s dimmed.
func (h *Human) Faint(s string) string { return h.style(h.r.NewStyle().Faint(true), s) }

// Good renders s as a success (green).
func (h *Human) Good(s string) string {
	return h.style(h.r.NewStyle().Foreground(lipgloss.Color("2")), s)
}

// Warn renders s as a warning (yellow).
func (h *Human) Warn(s string) string {
	return h.style(h.r.NewStyle().Foreground(lipgloss.Color("3")), s)
}

// Bad renders s as a problem (red, bold).
func (h *Human) Bad(s string) string {
	return h.style(h.r.NewStyle().Foreground(lipgloss.Color("1")).Bold(true), s)
}

// style renders s, made printable first, and remembers the result when it
// carries escape codes (see cell).
func (h *Human) style(st lipgloss.Style, s string) string {
	out := st.Render(textfmt.Printable(s))
	if strings.IndexByte(out, '\x1b') >= 0 {
		h.styled[out] = true
	}
	return out
}

// cell makes a table cell safe to print: text that is exactly what a style
// method rendered keeps its escape codes; every other part goes through
// Printable. This is the one place where every table's cells are escaped.
func (h *Human) cell(s string) string { return h.keepStyles(s, textfmt.Printable) }

// keepStyles applies safe to every part of s that is not exactly what a
// style method rendered.
func (h *Human) keepStyles(s string, safe func(string) string) string {
	if strings.IndexByte(s, '\x1b') < 0 {
		return safe(s)
	}
	var b strings.Builder
	plain := 0 // start of the text not yet written
	for i := 0; i < len(s); {
		if s[i] != '\x1b' {
			i++
			continue
		}
		seg := h.styledAt(s[i:])
		if seg == "" {
			i++
			continue
		}
		if plain < i {
			b.WriteString(safe(s[plain:i]))
		}
		b.WriteString(seg)
		i += len(seg)
		plain = i
	}
	if plain < len(s) {
		b.WriteString(safe(s[plain:]))
	}
	return b.String()
}

// styledAt returns the longest styled rendering s starts with, or "".
func (h *Human) styledAt(s string) string {
	best := ""
	for seg := range h.styled {
		if len(seg) > len(best) && strings.HasPrefix(s, seg) {
			best = seg
		}
	}
	return best
}

// Table writes rows under headers as aligned columns without borders, in
// the style of kubectl: easy to read and to grep.
func (h *Human) Table(headers []string, rows [][]string) {
	if len(rows) == 0 {
		fmt.Fprintln(h.w, h.Faint("(none)"))
		return
	}
	upper := make([]string, len(headers))
	for i, s := range headers {
		upper[i] = textfmt.Printable(strings.ToUpper(s))
	}
	safe := make([][]string, len(rows))
	for i, row := range rows {
		safe[i] = make([]string, len(row))
		for j, c := range row {
			safe[i][j] = h.cell(c)
		}
	}
	cell := h.r.NewStyle().PaddingRight(2)
	head := cell.Bold(true)
	t := table.New().
		Headers(upper...).
		Rows(safe...).
		BorderTop(false).BorderBottom(false).BorderLeft(false).BorderRight(false).
		BorderHeader(false).BorderColumn(false).BorderRow(false).
		StyleFunc(func(row, _ int) lipgloss.Style {
			if row == table.HeaderRow {
				return head
			}
			return cell
		})
	for _, line := range strings.Split(t.String(), "\n") {
		fmt.Fprintln(h.w, strings.TrimRight(line, " "))
	}
}

// KV writes aligned "key: value" lines, for one object's details.
func (h *Human) KV(pairs ...[2]string) {
	width := 0
	for _, p := range pairs {
		width = max(width, len(p[0]))
	}
	for _, p := range pairs {
		fmt.Fprintf(h.w, "%s%s  %s\n", h.Bold(p[0]+":"), strings.Repeat(" ", width-len(p[0])), h.cell(p[1]))
	}
}
