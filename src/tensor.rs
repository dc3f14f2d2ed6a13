//! What a tensor of a weights file is, whatever the format: its element type ([`Dtype`], the
//! safetensors dtypes) and its description ([`TensorInfo`]), shared by the safetensors and
//! GGUF readers.

/// Element types defined by the safetensors format; more may be added.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Dtype {
    /// `BOOL`: one byte per value.
    Bool,
    /// `U8`.
    U8,
    /// `I8`.
    I8,
    /// `F8_E5M2`: 8-bit float, 5 exponent bits.
    F8E5M2,
    /// `F8_E4M3`: 8-bit float, 4 exponent bits.
    F8E4M3,
    /// `I16`.
    I16,
    /// `U16`.
    U16,
    /// `F16`: IEEE half precision.
    F16,
    /// `BF16`: bfloat16, the top half of an F32.
    BF16,
    /// `I32`.
    I32,
    /// `U32`.
    U32,
    /// `F32`.
    F32,
    /// `I64`.
    I64,
    /// `U64`.
    U64,
    /// `F64`.
    F64,
}

impl Dtype {
    /// Every dtype.
    pub const ALL: [Dtype; 15] = {
        use Dtype::*;
        [
            Bool, U8, I8, F8E5M2, F8E4M3, I16, U16, F16, BF16, I32, U32, F32, I64, U64, F64,
        ]
    };

    /// Parses the header's dtype string (`"BF16"`, `"F8_E4M3"`...).
    pub fn parse(s: &str) -> Option<Dtype> {
        Dtype::ALL.into_iter().find(|d| d.name() == s)
    }

    /// The dtype's name in safetensors headers (`"BF16"`, `"F8_E4M3"`...).
    pub fn name(self) -> &'static str {
        use Dtype::*;
        match self {
            Bool => "BOOL",
            U8 => "U8",
            I8 => "I8",
            F8E5M2 => "F8_E5M2",
            F8E4M3 => "F8_E4M3",
            I16 => "I16",
            U16 => "U16",
            F16 => "F16",
            BF16 => "BF16",
            I32 => "I32",
            U32 => "U32",
            F32 => "F32",
            I64 => "I64",
            U64 => "U64",
            F64 => "F64",
        }
    }

    /// Bytes per element.
    pub fn width(self) -> u64 {
        use Dtype::*;
        match self {
            Bool | U8 | I8 | F8E5M2 | F8E4M3 => 1,
            I16 | U16 | F16 | BF16 => 2,
            I32 | U32 | F32 => 4,
            I64 | U64 | F64 => 8,
        }
    }
}

/// One tensor of a weights file (a safetensors or GGUF header): name, dtype, shape and where
/// its bytes lie.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct TensorInfo {
    /// Tensor name as in the header.
    pub name: String,
    /// The dtype string as written (kept for unknown dtypes; a GGUF tensor's ggml type name).
    pub dtype_name: String,
    /// Parsed dtype, `None` if the string is not a known safetensors dtype.
    pub dtype: Option<Dtype>,
    /// Shape.
    pub shape: Vec<u64>,
    /// Start of the data, relative to the end of the header (safetensors' `data_offsets`;
    /// GGUF's offset from the start of the tensor data).
    pub begin: u64,
    /// End of the data (exclusive), relative to the end of the header.
    pub end: u64,
}

impl TensorInfo {
    /// Bytes of data.
    pub fn len(&self) -> u64 {
        self.end - self.begin
    }

    /// Whether the tensor holds no bytes.
    pub fn is_empty(&self) -> bool {
        self.end == self.begin
    }
}
