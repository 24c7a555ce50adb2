package notifytransport.spark;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.core.StreamReadFeature;

import java.io.IOException;
import java.math.BigInteger;
import java.nio.ByteBuffer;
import java.nio.CharBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.util.Locale;

import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.api.java.UDF2;

/**
 * An oslo notification's Kafka value to the pipeline's columns, in the JVM, or null where this
 * class does not vouch for giving what the Python reference decoder gives.
 *
 * <p>It vouches only for what producers send: a 2.0 envelope holding exactly the version "2.0"
 * and the message as one string, or a 1.0 message; the message an object of the notification's
 * own keys, each once, with string ids, an ASCII-letter priority and an object or null
 * {@code _context}. The payload is written back as orjson writes it (compact, strings escaped
 * alike); a number orjson would write otherwise (an exponent, more than 15 significant digits, an
 * integer beyond 64 bits) and anything Jackson refuses, a lone surrogate, a byte order mark,
 * invalid UTF-8 or nesting deeper than {@link #MAX_DEPTH} make it answer null, so the pipeline
 * hands that record to Python. Returned row: message_id, publisher_id, event_type, priority
 * (upper case), payload (JSON, or null when not asked for), timestamp (as sent), request_id,
 * envelope ("2.0" or "1.0").
 */
public final class DecodeNotification implements UDF2<byte[], Boolean, Row> {
    private static final long serialVersionUID = 1L;

    /** How deep a message may nest for the JVM to decode it (deeper ones go to Python). */
    static final int MAX_DEPTH = 128;
    /** The reference marks a record 2.0 when its version key is within its first bytes. */
    private static final byte[] VERSION_KEY = "\"oslo.version\"".getBytes(StandardCharsets.UTF_8);
    private static final int ENVELOPE_SNIFF = 32;
    private static final BigInteger MIN_INT = BigInteger.valueOf(Long.MIN_VALUE);
    private static final BigInteger MAX_INT = BigInteger.ONE.shiftLeft(64).subtract(BigInteger.ONE);
    private static final char[] HEX = "0123456789abcdef".toCharArray();
    /** A string's characters are scanned from a copy in this buffer: an array loop, where
     * {@code String.charAt} checks the index and the string's coding at every character. */
    private static final ThreadLocal<char[]> SCAN = ThreadLocal.withInitial(() -> new char[1024]);
    /** The longest buffer a thread keeps: a longer string gets an array of its own, so one huge
     * record does not pin its size in every task thread for the executor's life. */
    private static final int SCAN_KEPT = 1 << 16;
    /** What {@link #scan} reports of a string that needs no escaping. */
    private static final int PLAIN = -1;

    private static final JsonFactory JSON = JsonFactory.builder()
            .enable(StreamReadFeature.STRICT_DUPLICATE_DETECTION)
            .build();

    /** Thrown where the record is left to Python; no stack trace, it is a verdict, not a fault. */
    static final class Defer extends Exception {
        private static final long serialVersionUID = 1L;
        static final Defer INSTANCE = new Defer();

        private Defer() {
            super("left to the reference decoder", null, false, false);
        }
    }

    /** The fields of a message being read. */
    private static final class Message {
        String messageId, publisherId, eventType, priority, payload, timestamp, requestId;
        boolean hasPayload;
    }

    @Override
    public Row call(byte[] value, Boolean withPayload) {
        if (value == null) {
            return null;
        }
        try {
            Message m = decode(value, withPayload == null || withPayload);
            return RowFactory.create(m.messageId, m.publisherId, m.eventType, m.priority, m.payload,
                    m.timestamp, m.requestId, envelope(value));
        } catch (Defer | IOException | RuntimeException exc) {
            return null;
        }
    }

    static Message decode(byte[] value, boolean withPayload) throws Defer, IOException {
        String text = utf8(value);
        noByteOrderMark(text);
        try (JsonParser outer = JSON.createParser(text)) {
            expect(outer.nextToken() == JsonToken.START_OBJECT);
            JsonToken first = outer.nextToken();
            expect(first == JsonToken.FIELD_NAME || first == JsonToken.END_OBJECT);
            String name = first == JsonToken.FIELD_NAME ? outer.currentName() : "";
            if (name.equals("oslo.version") || name.equals("oslo.message")) {
                String inner = envelopeMessage(outer);
                expect(outer.nextToken() == null);
                noByteOrderMark(inner);
                try (JsonParser parser = JSON.createParser(inner)) {
                    expect(parser.nextToken() == JsonToken.START_OBJECT);
                    Message m = message(parser, parser.nextToken(), withPayload, inner.length());
                    expect(parser.nextToken() == null);
                    return m;
                }
            }
            Message m = message(outer, first, withPayload, text.length());
            expect(outer.nextToken() == null);
            return m;
        }
    }

    /** The message string of a 2.0 envelope whose first field name is the current token. */
    private static String envelopeMessage(JsonParser p) throws Defer, IOException {
        String version = null, message = null;
        for (JsonToken t = p.currentToken(); t != JsonToken.END_OBJECT; t = p.nextToken()) {
            expect(t == JsonToken.FIELD_NAME);
            String name = p.currentName();
            expect(p.nextToken() == JsonToken.VALUE_STRING);
            if (name.equals("oslo.version")) {
                version = p.getText();
            } else if (name.equals("oslo.message")) {
                message = p.getText();
            } else {
                throw Defer.INSTANCE;
            }
        }
        expect("2.0".equals(version) && message != null);
        noLoneSurrogate(message);
        return message;
    }

    /**
     * The notification fields of an object whose first token after '{' is {@code first}; its text
     * is {@code size} characters long, room enough for the payload written back.
     */
    private static Message message(JsonParser p, JsonToken first, boolean withPayload, int size)
            throws Defer, IOException {
        Message m = new Message();
        for (JsonToken t = first; t != JsonToken.END_OBJECT; t = p.nextToken()) {
            expect(t == JsonToken.FIELD_NAME);
            String name = p.currentName();
            JsonToken v = p.nextToken();
            switch (name) {
                case "message_id": m.messageId = string(p, v); break;
                case "event_type": m.eventType = string(p, v); break;
                case "priority": m.priority = string(p, v); break;
                case "timestamp": m.timestamp = string(p, v); break;
                case "publisher_id":
                    m.publisherId = v == JsonToken.VALUE_STRING ? string(p, v) : null;
                    if (v != JsonToken.VALUE_STRING) {
                        copy(p, v, null, 1);
                    }
                    break;
                case "payload":
                    StringBuilder out = withPayload ? new StringBuilder(size) : null;
                    copy(p, v, out, 1);
                    m.payload = out == null ? null : out.toString();
                    m.hasPayload = true;
                    break;
                case "_context": context(p, v, m); break;
                default: throw Defer.INSTANCE;  // prefixed context keys or fields of its own
            }
        }
        expect(m.messageId != null && !m.messageId.isEmpty() && m.eventType != null && m.priority != null
                && m.timestamp != null && asciiLetters(m.priority));
        m.priority = m.priority.toUpperCase(Locale.ROOT);
        if (withPayload && !m.hasPayload) {
            m.payload = "null";
        }
        return m;
    }

    private static void context(JsonParser p, JsonToken v, Message m) throws Defer, IOException {
        if (v == JsonToken.VALUE_NULL) {
            return;
        }
        expect(v == JsonToken.START_OBJECT);
        for (JsonToken t = p.nextToken(); t != JsonToken.END_OBJECT; t = p.nextToken()) {
            expect(t == JsonToken.FIELD_NAME);
            String name = p.currentName();
            noLoneSurrogate(name);
            JsonToken value = p.nextToken();
            if (name.equals("request_id") && value == JsonToken.VALUE_STRING) {
                m.requestId = string(p, value);
            } else {
                if (name.equals("request_id")) {
                    m.requestId = null;
                }
                copy(p, value, null, 2);
            }
        }
    }

    private static String string(JsonParser p, JsonToken v) throws Defer, IOException {
        expect(v == JsonToken.VALUE_STRING);
        String s = p.getText();
        noLoneSurrogate(s);
        return s;
    }

    /** Writes the value at {@code v} as orjson would to {@code out} (or only checks it, when null). */
    private static void copy(JsonParser p, JsonToken v, StringBuilder out, int depth) throws Defer, IOException {
        expect(depth <= MAX_DEPTH);
        switch (v) {
            case START_OBJECT: {
                append(out, '{');
                boolean firstField = true;
                for (JsonToken t = p.nextToken(); t != JsonToken.END_OBJECT; t = p.nextToken()) {
                    expect(t == JsonToken.FIELD_NAME);
                    if (!firstField) {
                        append(out, ',');
                    }
                    firstField = false;
                    quote(p.currentName(), out);
                    append(out, ':');
                    copy(p, p.nextToken(), out, depth + 1);
                }
                append(out, '}');
                return;
            }
            case START_ARRAY: {
                append(out, '[');
                boolean firstItem = true;
                for (JsonToken t = p.nextToken(); t != JsonToken.END_ARRAY; t = p.nextToken()) {
                    if (!firstItem) {
                        append(out, ',');
                    }
                    firstItem = false;
                    copy(p, t, out, depth + 1);
                }
                append(out, ']');
                return;
            }
            case VALUE_STRING: quote(p.getText(), out); return;
            case VALUE_NUMBER_INT: append(out, integer(p.getText())); return;
            case VALUE_NUMBER_FLOAT: append(out, decimal(p.getText())); return;
            case VALUE_TRUE: append(out, "true"); return;
            case VALUE_FALSE: append(out, "false"); return;
            case VALUE_NULL: append(out, "null"); return;
            default: throw Defer.INSTANCE;
        }
    }

    /** An integer as Python writes it back: "-0" is 0; beyond 64 bits orjson refuses, so Python decides. */
    static String integer(String text) throws Defer {
        if (text.equals("-0")) {
            return "0";
        }
        int digits = text.length() - (text.startsWith("-") ? 1 : 0);
        if (digits >= 19) {
            BigInteger n = new BigInteger(text);
            expect(digits <= 20 && n.compareTo(MIN_INT) >= 0 && n.compareTo(MAX_INT) <= 0);
        }
        return text;
    }

    /**
     * A decimal without exponent and with at most 15 significant digits, from 1e-4 up, as Python's
     * float repr (and orjson) writes it: the same digits, trailing zeros of the fraction dropped.
     * Two such decimals never share a double, so these digits are the shortest that round-trip.
     */
    static String decimal(String text) throws Defer {
        int dot = text.indexOf('.');
        expect(dot > 0 && text.indexOf('e') < 0 && text.indexOf('E') < 0);
        boolean negative = text.charAt(0) == '-';
        String whole = text.substring(negative ? 1 : 0, dot);
        String fraction = text.substring(dot + 1);
        expect(!fraction.isEmpty() && digitsOnly(whole) && digitsOnly(fraction));
        int end = fraction.length();
        while (end > 1 && fraction.charAt(end - 1) == '0') {
            end--;
        }
        fraction = fraction.substring(0, end);
        String digits = (whole.equals("0") ? "" : whole) + fraction;
        int lead = 0;
        while (lead < digits.length() && digits.charAt(lead) == '0') {
            lead++;
        }
        boolean zero = lead == digits.length();
        if (!zero) {
            int significant = digits.length() - lead;
            expect(significant <= 15);
            // below 1e-4 Python writes an exponent: 0.0000x has four zeros after the point
            expect(!whole.equals("0") || lead < 4);
        }
        return (negative ? "-" : "") + whole + "." + fraction;
    }

    /** A JSON string as orjson writes it: quote, backslash and control characters escaped, the rest as is. */
    private static void quote(String s, StringBuilder out) throws Defer {
        int n = s.length();
        char[] chars = chars(s);
        int first = scan(chars, n);
        if (out == null) {
            return;
        }
        out.append('"');
        if (first == PLAIN) {
            out.append(s);  // one copy, in the string's own coding
        } else {
            out.append(chars, 0, first);
            for (int i = first; i < n; i++) {
                char c = chars[i];
                switch (c) {
                    case '"': out.append("\\\""); break;
                    case '\\': out.append("\\\\"); break;
                    case '\b': out.append("\\b"); break;
                    case '\t': out.append("\\t"); break;
                    case '\n': out.append("\\n"); break;
                    case '\f': out.append("\\f"); break;
                    case '\r': out.append("\\r"); break;
                    default:
                        if (c < 0x20) {
                            out.append("\\u00").append(HEX[c >> 4]).append(HEX[c & 0xf]);
                        } else {
                            out.append(c);
                        }
                }
            }
        }
        out.append('"');
    }

    /** {@code s}'s characters in the scan buffer (grown as needed up to {@link #SCAN_KEPT}). */
    private static char[] chars(String s) {
        char[] chars = SCAN.get();
        if (chars.length < s.length()) {
            if (s.length() > SCAN_KEPT) {
                return s.toCharArray();
            }
            chars = new char[Math.min(SCAN_KEPT, Math.max(s.length(), chars.length * 2))];
            SCAN.set(chars);
        }
        s.getChars(0, s.length(), chars, 0);
        return chars;
    }

    /**
     * The index of the first of {@code chars[0..n)} that JSON escapes, or {@link #PLAIN}; defers
     * on a lone surrogate (Python holds one where Java does, but neither orjson nor Arrow writes it).
     */
    private static int scan(char[] chars, int n) throws Defer {
        int first = PLAIN;
        for (int i = 0; i < n; i++) {
            char c = chars[i];
            if (c < 0x20 || c == '"' || c == '\\') {
                if (first == PLAIN) {
                    first = i;
                }
            } else if (c >= Character.MIN_SURROGATE && c <= Character.MAX_SURROGATE) {
                expect(Character.isHighSurrogate(c) && i + 1 < n && Character.isLowSurrogate(chars[i + 1]));
                i++;
            }
        }
        return first;
    }

    private static void noLoneSurrogate(String s) throws Defer {
        scan(chars(s), s.length());
    }

    /** Python's readers take a byte order mark in some places and refuse it in others: Python decides. */
    private static void noByteOrderMark(String text) throws Defer {
        expect(text.indexOf('\uFEFF') != 0);
    }

    /**
     * {@code value} decoded, deferring on invalid UTF-8. The JDK's lenient decoding is much
     * faster and replaces exactly what the strict one refuses, with U+FFFD: only a text holding
     * that character (a replacement, or one that was sent) is decoded again strictly.
     */
    private static String utf8(byte[] value) throws Defer {
        String text = new String(value, StandardCharsets.UTF_8);
        return text.indexOf('\uFFFD') < 0 ? text : strictUtf8(value);
    }

    private static String strictUtf8(byte[] value) throws Defer {
        try {
            CharBuffer chars = StandardCharsets.UTF_8.newDecoder()
                    .onMalformedInput(CodingErrorAction.REPORT)
                    .onUnmappableCharacter(CodingErrorAction.REPORT)
                    .decode(ByteBuffer.wrap(value));
            return chars.toString();
        } catch (CharacterCodingException exc) {
            throw Defer.INSTANCE;
        }
    }

    static String envelope(byte[] value) {
        int limit = Math.min(value.length, ENVELOPE_SNIFF) - VERSION_KEY.length;
        for (int i = 0; i <= limit; i++) {
            int j = 0;
            while (j < VERSION_KEY.length && value[i + j] == VERSION_KEY[j]) {
                j++;
            }
            if (j == VERSION_KEY.length) {
                return "2.0";
            }
        }
        return "1.0";
    }

    private static boolean asciiLetters(String s) {
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z'))) {
                return false;
            }
        }
        return true;
    }

    private static boolean digitsOnly(String s) {
        if (s.isEmpty()) {
            return false;
        }
        for (int i = 0; i < s.length(); i++) {
            if (s.charAt(i) < '0' || s.charAt(i) > '9') {
                return false;
            }
        }
        return true;
    }

    private static void append(StringBuilder out, char c) {
        if (out != null) {
            out.append(c);
        }
    }

    private static void append(StringBuilder out, String s) {
        if (out != null) {
            out.append(s);
        }
    }

    private static void expect(boolean condition) throws Defer {
        if (!condition) {
            throw Defer.INSTANCE;
        }
    }
}
