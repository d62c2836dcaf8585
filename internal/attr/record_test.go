package attr

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"
)

var (
	device   = New("device", STR)
	lastSeen = New("last_seen", DATETIME)
	tags     = New("tags", LIST(STR)).Optional()
	extra    = New("extra", ANY)
	count    = New("count", INT)
)

func TestBuildAndRead(t *testing.T) {
	seen := time.Date(2026, 7, 12, 9, 30, 0, 0, time.UTC)
	ev, err := Build[Event](device.Of("sensor-1"), lastSeen.Of(seen), tags.Of([]string{"a", "b"}))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := ev.Bytes()
	if string(b) != `{"device":"sensor-1","last_seen":"2026-07-12T09:30:00Z","tags":["a","b"]}` {
		t.Errorf("wire = %s", b)
	}
	got, err := lastSeen.MustGet(ev)
	if err != nil || !got.Equal(seen) {
		t.Errorf("MustGet = %v, %v", got, err)
	}
}

func TestRequiredRejectsNullAndRemovalAtWrite(t *testing.T) {
	for name, f := range map[string]Field{
		"Null":     device.Null(),
		"Delete":   device.Delete(),
		"nil ANY":  extra.Of(nil),
		"bad type": extra.Of([]byte("x")),
	} {
		_, err := Build[Event](f)
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Name != f.Name() {
			t.Errorf("%s: err = %v", name, err)
		}
		if name != "bad type" && !errors.Is(err, ErrRequired) {
			t.Errorf("%s: %v is not ErrRequired", name, err)
		}
	}
	ev, err := Build[Event](tags.Null())
	if err != nil {
		t.Fatalf("optional null: %v", err)
	}
	if !tags.Has(ev) {
		t.Error("optional null was not stored")
	}
	if _, ok, err := tags.Get(ev); ok || err != nil {
		t.Errorf("null reads as absent: ok=%v err=%v", ok, err)
	}
	ev, _ = ev.With(tags.Delete())
	if tags.Has(ev) {
		t.Error("optional delete kept the member")
	}
}

func TestGetAndMustGet(t *testing.T) {
	ev, _ := Wrap[Event](map[string]any{"count": "three", "device": nil})
	if _, ok, err := device.Get(ev); ok || err != nil {
		t.Errorf("null: ok=%v err=%v", ok, err)
	}
	if _, err := device.MustGet(ev); !errors.Is(err, ErrMissing) {
		t.Errorf("MustGet on null: %v", err)
	}
	if _, err := tags.MustGet(ev); !errors.Is(err, ErrMissing) {
		t.Errorf("MustGet on absent: %v", err)
	}
	_, ok, err := count.Get(ev)
	var fe *FieldError
	if !ok || !errors.As(err, &fe) || fe.Op != "read" || fe.Name != "count" {
		t.Errorf("wrong type: ok=%v err=%v", ok, err)
	}
}

func TestWithIsCopyWithOverrides(t *testing.T) {
	orig, _ := Wrap[State](map[string]any{"device": "a", "raw_passthrough": map[string]any{"x": json.Number("1.50")}})
	next, err := orig.With(device.Of("b"), count.Of(2))
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := device.MustGet(orig); v != "a" {
		t.Errorf("original changed: %v", v)
	}
	if v, _ := device.MustGet(next); v != "b" {
		t.Errorf("override lost: %v", v)
	}
	b, _ := next.Bytes()
	if string(b) != `{"count":2,"device":"b","raw_passthrough":{"x":1.5}}` {
		t.Errorf("carried members changed: %s", b)
	}
	// A failing field leaves no partial result.
	same, err := orig.With(device.Of("c"), count.Of(1), extra.Of(func() {}))
	if err == nil || !same.Equal(orig) {
		t.Errorf("failed With: err=%v rec=%v", err, same.Raw())
	}
}

func TestRecordsAreImmutableThroughReads(t *testing.T) {
	ev, _ := Wrap[Event](map[string]any{"extra": map[string]any{"k": "v"}})
	raw := ev.Raw()
	raw["extra"].(map[string]any)["k"] = "changed"
	v, _ := extra.MustGet(ev)
	v.(map[string]any)["k"] = "changed too"
	rv, _ := ev.RawValue("extra")
	if rv.(map[string]any)["k"] != "v" {
		t.Errorf("record mutated through a read: %v", rv)
	}
}

func TestWrapNormalizesAndCopies(t *testing.T) {
	src := map[string]any{"n": 1, "list": []any{"x"}, "when": time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	cfg, err := Wrap[Config](src)
	if err != nil {
		t.Fatal(err)
	}
	src["list"].([]any)[0] = "y"
	b, _ := cfg.Bytes()
	if string(b) != `{"list":["x"],"n":1,"when":"2026-01-02T03:04:05Z"}` {
		t.Errorf("wrap = %s", b)
	}
	if _, err := Wrap[Config](map[string]any{"blob": []byte("x")}); err == nil {
		t.Error("Wrap accepted binary")
	}
	empty, err := Wrap[Config](nil)
	if err != nil || empty.Len() != 0 {
		t.Errorf("nil map: %v %v", empty, err)
	}
}

func TestConvertAndNames(t *testing.T) {
	cfg, _ := Wrap[Config](map[string]any{"b": true, "a": false})
	st := Convert[State](cfg)
	if !reflect.DeepEqual(st.Names(), []string{"a", "b"}) || !st.Equal(cfg) {
		t.Errorf("Convert: %v", st.Names())
	}
}

func TestRECORDAttributeRoundTrip(t *testing.T) {
	creds := New("creds", RECORD)
	user := New("user", STR)
	inner, _ := Build[Record](user.Of("u"))
	cfg, err := Build[Config](creds.Of(inner))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := creds.MustGet(cfg)
	if u, _ := user.MustGet(got); u != "u" {
		t.Errorf("nested read %q", u)
	}
}

func TestAttributeString(t *testing.T) {
	if s := tags.String(); s != `Attribute("tags", LIST(STR), optional)` {
		t.Errorf("String = %s", s)
	}
	if s := device.String(); s != `Attribute("device", STR)` {
		t.Errorf("String = %s", s)
	}
}

func TestMarshalJSONOfRecord(t *testing.T) {
	ev, _ := Build[Event](device.Of("x"))
	b, err := json.Marshal(struct{ E Event }{ev})
	if err != nil || string(b) != `{"E":{"device":"x"}}` {
		t.Errorf("json.Marshal = %s, %v", b, err)
	}
}
