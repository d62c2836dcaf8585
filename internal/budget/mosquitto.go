package budget

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/flecht-dev/flecht/internal/boundedread"
)

// Mosquitto's defaults for the settings the budget reads (mosquitto.conf(5),
// Mosquitto 2.x).
const (
	MosquittoDefaultMaxQueuedMessages   = 1000
	MosquittoDefaultMaxInflightMessages = 20
)

// MosquittoConf is what a mosquitto.conf says about a session's queue and
// in-flight window. A zero limit means unlimited, as in Mosquitto.
type MosquittoConf struct {
	Path                string `json:"path,omitempty"`
	MaxQueuedMessages   int64  `json:"max_queued_messages"`
	MaxQueuedBytes      int64  `json:"max_queued_bytes"`
	MaxInflightMessages int    `json:"max_inflight_messages"`
	MaxInflightBytes    int64  `json:"max_inflight_bytes"`
	QueueQoS0Messages   bool   `json:"queue_qos0_messages"`
	// PersistentClientExpiration is Mosquitto's own cap on how long a
	// disconnected persistent session lives (0 = none).
	PersistentClientExpirationS float64 `json:"persistent_client_expiration_s,omitempty"`
	// Set lists the settings the file sets explicitly (the rest are
	// Mosquitto's defaults).
	Set      []string `json:"set"`
	Warnings []string `json:"warnings"`
	// IncludeDirs are the include_dir directories named by the file, in
	// order; LoadMosquittoConf reads them, ParseMosquittoConf does not.
	IncludeDirs []string `json:"-"`
}

// IsSet reports whether the file set the named option itself.
func (c *MosquittoConf) IsSet(name string) bool {
	for _, s := range c.Set {
		if s == name {
			return true
		}
	}
	return false
}

// NewMosquittoConf returns Mosquitto's defaults.
func NewMosquittoConf() *MosquittoConf {
	return &MosquittoConf{
		MaxQueuedMessages:   MosquittoDefaultMaxQueuedMessages,
		MaxInflightMessages: MosquittoDefaultMaxInflightMessages,
		Set:                 []string{},
		Warnings:            []string{},
	}
}

// ParseMosquittoConf reads the settings from one mosquitto.conf into c
// (start from NewMosquittoConf). name labels errors and warnings. Lines are
// "option value"; lines starting with # are comments. Options other than
// the queue and in-flight limits are ignored, as are per-listener
// sections: these limits are global in Mosquitto 2.
func ParseMosquittoConf(c *MosquittoConf, name string, data []byte) error {
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		fields := strings.Fields(text)
		opt, args := fields[0], fields[1:]
		where := fmt.Sprintf("%s:%d", name, line)
		arg := func() (string, error) {
			if len(args) == 0 {
				return "", fmt.Errorf("%s: %s needs a value", where, opt)
			}
			return args[0], nil
		}
		intArg := func() (int64, error) {
			a, err := arg()
			if err != nil {
				return 0, err
			}
			v, err := strconv.ParseInt(a, 10, 64)
			if err != nil {
				return 0, fmt.Errorf("%s: %s %s is not a whole number", where, opt, boundedread.Quote(a))
			}
			return v, nil
		}
		switch opt {
		case "max_queued_messages":
			v, err := intArg()
			if err != nil {
				return err
			}
			if v < 0 {
				c.Warnings = append(c.Warnings, fmt.Sprintf("%s: max_queued_messages %d is negative; Mosquitto reads it as 0 (unlimited)", where, v))
				v = 0
			}
			c.MaxQueuedMessages = v
		case "max_queued_bytes":
			v, err := intArg()
			if err != nil {
				return err
			}
			if v < 0 {
				return fmt.Errorf("%s: max_queued_bytes %d is negative", where, v)
			}
			c.MaxQueuedBytes = v
		case "max_inflight_messages":
			v, err := intArg()
			if err != nil {
				return err
			}
			// Mosquitto treats a negative value and 65535 as "no maximum"
			// and refuses to start with a larger one.
			if v > MaxInflight {
				return fmt.Errorf("%s: max_inflight_messages %d is above %d, and Mosquitto refuses to start with it; use at most %d (or 0 or %d for no limit)", where, v, MaxInflight, MaxInflight-1, MaxInflight)
			}
			if v < 0 || v == MaxInflight {
				v = 0
			}
			c.MaxInflightMessages = int(v)
		case "max_inflight_bytes":
			v, err := intArg()
			if err != nil {
				return err
			}
			if v < 0 {
				return fmt.Errorf("%s: max_inflight_bytes %d is negative", where, v)
			}
			c.MaxInflightBytes = v
		case "queue_qos0_messages":
			a, err := arg()
			if err != nil {
				return err
			}
			switch a {
			case "true":
				c.QueueQoS0Messages = true
			case "false":
				c.QueueQoS0Messages = false
			default:
				return fmt.Errorf("%s: queue_qos0_messages %s: use true or false", where, boundedread.Quote(a))
			}
		case "persistent_client_expiration":
			a, err := arg()
			if err != nil {
				return err
			}
			d, err := parseMosquittoDuration(a)
			if err != nil {
				return fmt.Errorf("%s: persistent_client_expiration: %v", where, err)
			}
			c.PersistentClientExpirationS = d.Seconds()
		case "include_dir":
			if _, err := arg(); err != nil {
				return err
			}
			c.IncludeDirs = append(c.IncludeDirs, strings.Join(args, " "))
			continue
		default:
			continue
		}
		if !c.IsSet(opt) {
			c.Set = append(c.Set, opt)
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// parseMosquittoDuration reads Mosquitto's "<n><h|d|w|m|y>" durations
// (m is months, as Mosquitto counts them: 30 days; y is 365 days).
func parseMosquittoDuration(s string) (time.Duration, error) {
	if len(s) < 2 {
		return 0, fmt.Errorf("%s: use a number and h, d, w, m or y (e.g. 1d)", boundedread.Quote(s))
	}
	n, err := strconv.ParseInt(s[:len(s)-1], 10, 32)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%s: use a number and h, d, w, m or y (e.g. 1d)", boundedread.Quote(s))
	}
	day := 24 * time.Hour
	unit := map[byte]time.Duration{'h': time.Hour, 'd': day, 'w': 7 * day, 'm': 30 * day, 'y': 365 * day}[s[len(s)-1]]
	if unit == 0 {
		return 0, fmt.Errorf("%s: use a number and h, d, w, m or y (e.g. 1d)", boundedread.Quote(s))
	}
	if time.Duration(n) > math.MaxInt64/unit {
		return 0, fmt.Errorf("%s is too long", boundedread.Quote(s))
	}
	return time.Duration(n) * unit, nil
}

// MosquittoConfFile is what a mosquitto.conf (and each file of its
// include_dir) is to a read: settings of a line each.
var MosquittoConfFile = boundedread.Kind{Name: "mosquitto.conf", Limit: 1 << 20}

// LoadMosquittoConf reads a mosquitto.conf and the *.conf files of its
// include_dir directories (in name order, as Mosquitto does). A directory
// that cannot be read is a warning, not an error: the main file still
// says something.
func LoadMosquittoConf(path string) (*MosquittoConf, error) {
	data, err := MosquittoConfFile.ReadFile(path)
	if err != nil {
		return nil, err
	}
	c := NewMosquittoConf()
	c.Path = path
	if err := ParseMosquittoConf(c, path, data); err != nil {
		return nil, err
	}
	dirs := c.IncludeDirs
	c.IncludeDirs = nil
	for _, dir := range dirs {
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(filepath.Dir(path), dir)
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			c.Warnings = append(c.Warnings, fmt.Sprintf("include_dir %s ignored: %v", dir, err))
			continue
		}
		names := []string{}
		for _, e := range entries {
			if !e.IsDir() && strings.HasSuffix(e.Name(), ".conf") {
				names = append(names, e.Name())
			}
		}
		sort.Strings(names)
		for _, n := range names {
			p := filepath.Join(dir, n)
			b, err := MosquittoConfFile.ReadFile(p)
			if err != nil {
				c.Warnings = append(c.Warnings, fmt.Sprintf("ignored: %v", err))
				continue
			}
			if err := ParseMosquittoConf(c, p, b); err != nil {
				return nil, err
			}
		}
		// Nested include_dir is not allowed by Mosquitto either.
		if len(c.IncludeDirs) > 0 {
			c.Warnings = append(c.Warnings, fmt.Sprintf("include_dir inside %s ignored", dir))
			c.IncludeDirs = nil
		}
	}
	return c, nil
}
