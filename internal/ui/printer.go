package ui

import (
	"fmt"
	"io"
	"strings"

	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/lipgloss/table"
	"github.com/muesli/termenv"
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
}

// NewHuman returns a human writer on w, with or without colour.
func NewHuman(w io.Writer, color bool) *Human {
	r := lipgloss.NewRenderer(w)
	if color {
		r.SetColorProfile(termenv.ANSI256)
	} else {
		r.SetColorProfile(termenv.Ascii)
	}
	return &Human{w: w, r: r}
}

// Writer is the underlying writer, for free-form text.
func (h *Human) Writer() io.Writer { return h.w }

// Printf writes formatted text.
func (h *Human) Printf(format string, args ...any) { fmt.Fprintf(h.w, format, args...) }

// Bold renders s in bold (plain without colour).
func (h *Human) Bold(s string) string { return h.r.NewStyle().Bold(true).Render(s) }

// Faint renders s dimmed.
func (h *Human) Faint(s string) string { return h.r.NewStyle().Faint(true).Render(s) }

// Good renders s as a success (green).
func (h *Human) Good(s string) string {
	return h.r.NewStyle().Foreground(lipgloss.Color("2")).Render(s)
}

// Warn renders s as a warning (yellow).
func (h *Human) Warn(s string) string {
	return h.r.NewStyle().Foreground(lipgloss.Color("3")).Render(s)
}

// Bad renders s as a problem (red, bold).
func (h *Human) Bad(s string) string {
	return h.r.NewStyle().Foreground(lipgloss.Color("1")).Bold(true).Render(s)
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
		upper[i] = strings.ToUpper(s)
	}
	cell := h.r.NewStyle().PaddingRight(2)
	head := cell.Bold(true)
	t := table.New().
		Headers(upper...).
		Rows(rows...).
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
		fmt.Fprintf(h.w, "%s%s  %s\n", h.Bold(p[0]+":"), strings.Repeat(" ", width-len(p[0])), p[1])
	}
}
