// Attributes on the root group of an H5File: small metadata such as num_classes.
#include "mirrored/io/hdf5.h"

#include "h5_check.h"

namespace mirrored::io {
namespace {

std::string attribute_target(const H5File& file, const std::string& name) {
  return str_cat("'", file.path(), "' attribute ", name);
}

H5Handle open_root(const H5File& file, const std::string& target) {
  return H5Handle(MIRRORED_H5_CHECK(H5Gopen2(file.id(), "/", H5P_DEFAULT), target), H5Gclose);
}

H5Handle open_attribute(const H5File& file, const std::string& name) {
  const std::string target = attribute_target(file, name);
  const H5Handle root = open_root(file, target);
  if (MIRRORED_H5_CHECK(H5Aexists(root.get(), name.c_str()), target) == 0) {
    throw InputError(str_cat("'", file.path(), "': attribute ", name, " is missing"));
  }
  return H5Handle(MIRRORED_H5_CHECK(H5Aopen(root.get(), name.c_str(), H5P_DEFAULT), target),
                  H5Aclose);
}

// Writes a scalar attribute, replacing one of the same name.
void write_scalar(const H5File& file, const std::string& name, hid_t file_type,
                  hid_t memory_type, const void* value) {
  const std::string target = attribute_target(file, name);
  const H5Handle root = open_root(file, target);
  if (MIRRORED_H5_CHECK(H5Aexists(root.get(), name.c_str()), target) > 0) {
    MIRRORED_H5_CHECK(H5Adelete(root.get(), name.c_str()), target);
  }
  const H5Handle space(MIRRORED_H5_CHECK(H5Screate(H5S_SCALAR), target), H5Sclose);
  const H5Handle attribute(MIRRORED_H5_CHECK(H5Acreate2(root.get(), name.c_str(), file_type,
                                                        space.get(), H5P_DEFAULT, H5P_DEFAULT),
                                             target),
                           H5Aclose);
  MIRRORED_H5_CHECK(H5Awrite(attribute.get(), memory_type, value), target);
}

}  // namespace

void H5File::write_attribute(const std::string& name, int64_t value) {
  write_scalar(*this, name, H5T_STD_I64LE, H5T_NATIVE_INT64, &value);
}

void H5File::write_attribute(const std::string& name, const std::string& value) {
  const std::string target = attribute_target(*this, name);
  const H5Handle type(MIRRORED_H5_CHECK(H5Tcopy(H5T_C_S1), target), H5Tclose);
  MIRRORED_H5_CHECK(H5Tset_size(type.get(), value.size() + 1), target);  // + the terminator
  write_scalar(*this, name, type.get(), type.get(), value.c_str());
}

bool H5File::has_attribute(const std::string& name) const {
  const std::string target = attribute_target(*this, name);
  const H5Handle root = open_root(*this, target);
  return MIRRORED_H5_CHECK(H5Aexists(root.get(), name.c_str()), target) > 0;
}

int64_t H5File::read_int_attribute(const std::string& name) const {
  const H5Handle attribute = open_attribute(*this, name);
  const std::string target = attribute_target(*this, name);
  const H5Handle type(MIRRORED_H5_CHECK(H5Aget_type(attribute.get()), target), H5Tclose);
  if (MIRRORED_H5_CHECK(H5Tget_class(type.get()), target) != H5T_INTEGER) {
    throw InputError(str_cat("'", path_, "': attribute ", name, " is not an integer"));
  }
  int64_t value = 0;
  MIRRORED_H5_CHECK(H5Aread(attribute.get(), H5T_NATIVE_INT64, &value), target);
  return value;
}

void H5File::write_real_attribute(const std::string& name, double value) {
  write_scalar(*this, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &value);
}

double H5File::read_real_attribute(const std::string& name) const {
  const H5Handle attribute = open_attribute(*this, name);
  const std::string target = attribute_target(*this, name);
  const H5Handle type(MIRRORED_H5_CHECK(H5Aget_type(attribute.get()), target), H5Tclose);
  const H5T_class_t type_class = MIRRORED_H5_CHECK(H5Tget_class(type.get()), target);
  const H5Handle space(MIRRORED_H5_CHECK(H5Aget_space(attribute.get()), target), H5Sclose);
  if ((type_class != H5T_INTEGER && type_class != H5T_FLOAT) ||
      MIRRORED_H5_CHECK(H5Sget_simple_extent_npoints(space.get()), target) != 1) {
    throw InputError(str_cat("'", path_, "': attribute ", name, " is not a single number"));
  }
  double value = 0.0;
  MIRRORED_H5_CHECK(H5Aread(attribute.get(), H5T_NATIVE_DOUBLE, &value), target);
  return value;
}

std::string H5File::read_string_attribute(const std::string& name) const {
  const H5Handle attribute = open_attribute(*this, name);
  const std::string target = attribute_target(*this, name);
  const H5Handle stored(MIRRORED_H5_CHECK(H5Aget_type(attribute.get()), target), H5Tclose);
  if (MIRRORED_H5_CHECK(H5Tget_class(stored.get()), target) != H5T_STRING) {
    throw InputError(str_cat("'", path_, "': attribute ", name, " is not a string"));
  }
  const H5Handle memory(MIRRORED_H5_CHECK(H5Tcopy(H5T_C_S1), target), H5Tclose);
  // Python tools (h5py) write variable-length strings; this code writes fixed-length ones.
  if (MIRRORED_H5_CHECK(H5Tis_variable_str(stored.get()), target) > 0) {
    MIRRORED_H5_CHECK(H5Tset_size(memory.get(), H5T_VARIABLE), target);
    char* text = nullptr;
    MIRRORED_H5_CHECK(H5Aread(attribute.get(), memory.get(), &text), target);
    std::string value = text != nullptr ? text : "";
    H5free_memory(text);
    return value;
  }
  const size_t size = H5Tget_size(stored.get());
  MIRRORED_H5_CHECK(H5Tset_size(memory.get(), size + 1), target);  // room for a terminator
  std::string buffer(size + 1, '\0');
  MIRRORED_H5_CHECK(H5Aread(attribute.get(), memory.get(), buffer.data()), target);
  return std::string(buffer.c_str());
}

}  // namespace mirrored::io
