// json_tree: the report reader's view of a parsed JSON value, one interface over the two trees it reads:
// nlohmann's (a model built or edited in memory: tests, the C API) and rapidjson's (report files: parsing is
// most of what `merge` of thousands of ranks costs, and rapidjson parses several times faster). Either way
// the one Reader in report_json.cpp walks the same fields() lists over it.
#pragma once

#include <nlohmann/json.hpp>
#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <cstdint>
#include <string>
#include <string_view>

namespace cumemaudit::report::json_tree {

// ---- nlohmann
inline const char* type_name(const nlohmann::json& j) { return j.type_name(); }
inline bool is_null(const nlohmann::json& j) { return j.is_null(); }
inline bool is_bool(const nlohmann::json& j) { return j.is_boolean(); }
inline bool as_bool(const nlohmann::json& j) { return j.get<bool>(); }
inline bool is_uint(const nlohmann::json& j) {
    return j.is_number_unsigned() || (j.is_number_integer() && j.get<std::int64_t>() >= 0);
}
inline std::uint64_t as_uint(const nlohmann::json& j) { return j.get<std::uint64_t>(); }
inline bool is_int(const nlohmann::json& j) { return j.is_number_integer() && !(j.is_number_unsigned() && j.get<std::uint64_t>() > INT64_MAX); }
inline std::int64_t as_int(const nlohmann::json& j) { return j.get<std::int64_t>(); }
inline bool is_number(const nlohmann::json& j) { return j.is_number(); }
inline double as_double(const nlohmann::json& j) { return j.get<double>(); }
inline bool is_string(const nlohmann::json& j) { return j.is_string(); }
inline std::string_view as_string(const nlohmann::json& j) { return j.get_ref<const std::string&>(); }
inline bool is_object(const nlohmann::json& j) { return j.is_object(); }
inline bool is_array(const nlohmann::json& j) { return j.is_array(); }
inline std::size_t size(const nlohmann::json& j) { return j.size(); }
inline const nlohmann::json& element(const nlohmann::json& j, std::size_t i) { return j[i]; }
inline const nlohmann::json* member(const nlohmann::json& j, const char* key) {
    const auto it = j.find(key);
    return it == j.end() ? nullptr : &*it;
}
template <class F> void for_members(const nlohmann::json& j, F&& f) {
    for (const auto& [k, v] : j.items()) f(std::string_view(k), v);
}
inline std::string dump(const nlohmann::json& j) { return j.dump(); }

// ---- rapidjson
inline const char* type_name(const rapidjson::Value& j) {
    switch (j.GetType()) {
    case rapidjson::kNullType: return "null";
    case rapidjson::kFalseType:
    case rapidjson::kTrueType: return "boolean";
    case rapidjson::kObjectType: return "object";
    case rapidjson::kArrayType: return "array";
    case rapidjson::kStringType: return "string";
    case rapidjson::kNumberType: return "number";
    }
    return "number";
}
inline bool is_null(const rapidjson::Value& j) { return j.IsNull(); }
inline bool is_bool(const rapidjson::Value& j) { return j.IsBool(); }
inline bool as_bool(const rapidjson::Value& j) { return j.GetBool(); }
inline bool is_uint(const rapidjson::Value& j) { return j.IsUint64(); }
inline std::uint64_t as_uint(const rapidjson::Value& j) { return j.GetUint64(); }
inline bool is_int(const rapidjson::Value& j) { return j.IsInt64(); }
inline std::int64_t as_int(const rapidjson::Value& j) { return j.GetInt64(); }
inline bool is_number(const rapidjson::Value& j) { return j.IsNumber(); }
inline double as_double(const rapidjson::Value& j) { return j.GetDouble(); }
inline bool is_string(const rapidjson::Value& j) { return j.IsString(); }
inline std::string_view as_string(const rapidjson::Value& j) { return {j.GetString(), j.GetStringLength()}; }
inline bool is_object(const rapidjson::Value& j) { return j.IsObject(); }
inline bool is_array(const rapidjson::Value& j) { return j.IsArray(); }
inline std::size_t size(const rapidjson::Value& j) { return j.IsArray() ? j.Size() : j.MemberCount(); }
inline const rapidjson::Value& element(const rapidjson::Value& j, std::size_t i) { return j[static_cast<rapidjson::SizeType>(i)]; }
inline const rapidjson::Value* member(const rapidjson::Value& j, const char* key) {
    const auto it = j.FindMember(key);
    return it == j.MemberEnd() ? nullptr : &it->value;
}
template <class F> void for_members(const rapidjson::Value& j, F&& f) {
    for (const auto& m : j.GetObject()) f(as_string(m.name), m.value);
}
inline std::string dump(const rapidjson::Value& j) {
    rapidjson::StringBuffer out;
    rapidjson::Writer<rapidjson::StringBuffer> writer(out);
    j.Accept(writer);
    return {out.GetString(), out.GetSize()};
}

}  // namespace cumemaudit::report::json_tree
