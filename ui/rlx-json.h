/* Reading fields of the app's own JSON files (saved conversations and
 * transcripts) with json-c: a field of the wanted type, or a default. */
#ifndef RLX_UI_JSON_H
#define RLX_UI_JSON_H

#include <glib.h>
#include <json-c/json.h>

/* o[key] when it is a string, else NULL (owned by o) */
static inline const char *rlx_json_str(json_object *o, const char *key)
{
    json_object *v = NULL;
    if (json_object_object_get_ex(o, key, &v) && json_object_is_type(v, json_type_string))
        return json_object_get_string(v);
    return NULL;
}

/* o[key] when it is a number, else def */
static inline gint64 rlx_json_int(json_object *o, const char *key, gint64 def)
{
    json_object *v = NULL;
    if (json_object_object_get_ex(o, key, &v) &&
        (json_object_is_type(v, json_type_int) || json_object_is_type(v, json_type_double)))
        return json_object_get_int64(v);
    return def;
}

#endif
