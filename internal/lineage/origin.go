package lineage

// HeaderOrigin names who wrote a raw record, the start of a lineage: the
// MQTT bridge or an extractor. Records a transformer writes carry Source
// instead, so trace follows Source up and stops at Origin.
const HeaderOrigin = "flecht.lineage.origin"

// MQTTOrigin is the origin of a record the MQTT bridge relayed from one
// message: "mqtt:<mqtt topic>" (the record's timestamp is the time the
// bridge received it).
func MQTTOrigin(mqttTopic string) string { return "mqtt:" + mqttTopic }

// ExtractorOrigin is the origin of a record an extractor wrote while
// polling one config: "extractor:<application id>/<config key>". An
// application id holds no '/', so the first one ends it.
func ExtractorOrigin(applicationID, configKey string) string {
	return "extractor:" + applicationID + "/" + configKey
}
