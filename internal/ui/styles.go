package ui

import "github.com/charmbracelet/lipgloss"

// Styles for full-screen views (the demo's live frame), beside Bold, Faint,
// Good and Warn. A view that only styles strings takes NewHuman(io.Discard,
// color): lipgloss stays inside this package.

// Title renders s as a view's title (bold cyan).
func (h *Human) Title(s string) string {
	return h.r.NewStyle().Bold(true).Foreground(lipgloss.Color("6")).Render(s)
}

// Head renders s as a column header inside a view (bold, dimmed).
func (h *Human) Head(s string) string { return h.r.NewStyle().Bold(true).Faint(true).Render(s) }

// Box frames s with a rounded grey border, width columns wide in all.
func (h *Human) Box(s string, width int) string {
	return h.r.NewStyle().Border(lipgloss.RoundedBorder()).BorderForeground(lipgloss.Color("8")).
		Padding(0, 1).Width(width - 2).Render(s)
}

// Width is the number of terminal columns s takes, escape sequences and
// wide runes counted as shown.
func Width(s string) int { return lipgloss.Width(s) }
