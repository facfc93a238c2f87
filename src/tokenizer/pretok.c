/* pretok.c — the pre-tokenizers of llama.cpp, per tokenizer.ggml.pre (see pretok.h). The regex lists are
 * the facts llama.cpp uses (src/llama-vocab.cpp, llm_tokenizer_bpe); the splitters and the std::regex
 * emulation on PCRE2 are braid's own. */
#define PCRE2_CODE_UNIT_WIDTH 32
#include "tokenizer/pretok.h"

#include <pcre2.h>
#include <string.h>

#include "base/alloc.h"
#include "base/status.h"
#include "tokenizer/unicode.h"

/* ---- regex lists per pre-tokenizer type ------------------------------------------------------------- */

static const char *const rx_llama3[] = {
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    NULL};
static const char *const rx_jais2[] = {
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s{512}(?!\\S)|\\s{256}(?!\\S)|\\s{128}(?!\\S)|\\s{64}(?!\\S)|\\s{32}(?!\\S)|\\s{16}(?!\\S)|\\s{8}(?!\\S)|\\s{4}(?!\\S)|\\s{1,2}(?!\\S)|\\s{1}",
    NULL};
static const char *const rx_dbrx[] = {
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    NULL};
static const char *const rx_deepseek_llm[] = {
    "[\r\n]",
    "\\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-ώᾀ-ᾴᾶ-ᾼιῂ-ῄῆ-ῌῐ-ΐῖ-Ίῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤΩℨK-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]+",
    "\\s?[!-/:-~！-／：-～‘-‟　-。]+",
    "\\s+$",
    "[一-龥ࠀ-一가-퟿]+",
    "\\p{N}+",
    NULL};
static const char *const rx_deepseek3_llm[] = {
    "\\p{N}{1,3}",
    "[一-龥぀-ゟ゠-ヿ]+",
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+",
    NULL};
static const char *const rx_spark2_5[] = {
    "\\p{N}{1,3}",
    "[一-龥぀-ゟ゠-ヿ]+",
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+|[\r\n]|\\s+(?!\\S)|\\s+",
    "\\p{N}",
    NULL};
static const char *const rx_youtu[] = {
    "[가-힣ㄱ-ㆎ]+|[！…“”‘’—：；，、-〿︰-﹏]+|[ㄅ-ㄯ]+|[一-龥぀-ゟ゠-ヿ]+",
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    NULL};
static const char *const rx_deepseek_coder[] = {
    "[\r\n]",
    "\\s?\\p{L}+",
    "\\s?\\p{P}+",
    "[一-龥ࠀ-一가-퟿]+",
    "\\p{N}",
    NULL};
static const char *const rx_falcon[] = {
    "[\\p{P}\\$\\+<=>\\^~\\|`]+",
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)",
    "[0-9][0-9][0-9]",
    NULL};
static const char *const rx_starcoder[] = {
    "\\p{N}",
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)",
    NULL};
static const char *const rx_gpt2[] = {
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)",
    NULL};
static const char *const rx_qwen2[] = {
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    NULL};
static const char *const rx_qwen35[] = {
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    NULL};
static const char *const rx_poro[] = {
    " ?[^(\\s|.,!?…。，、।۔،)]+",
    NULL};
static const char *const rx_chatglm4[] = {
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    NULL};
static const char *const rx_viking[] = {
    " ?[^(\\s|.,!?…。，、।۔،)]+",
    "\\p{N}",
    NULL};
static const char *const rx_tekken[] = {
    "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    NULL};
static const char *const rx_chameleon[] = {
    "<sentinel:[0-9]+>",
    "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z",
    "([\\t\\n]|    |  )",
    "\\p{N}",
    "[\\p{P}!-/:-@\\[-`{-~]",
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)",
    NULL};
static const char *const rx_gpt4o[] = {
    "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    NULL};
static const char *const rx_granite_emb_multi[] = {
    "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}\\p{M}])([^a-z]))*((?=[\\p{L}\\p{M}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}\\p{M}])([^a-z]))+((?=[\\p{L}\\p{M}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    NULL};
static const char *const rx_tiny_aya[] = {
    "\\d{1,3}(?=(?:\\d{3})*\\b)",
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    NULL};
static const char *const rx_superbpe[] = {
    "\\p{N}+",
    "(?=(\\d{3})+(?!\\d))",
    NULL};
static const char *const rx_bailingmoe[] = {
    "'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+",
    NULL};
static const char *const rx_seed_coder[] = {
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1}| ?[^\\s\\p{L}\\p{N}\\r\\n]+|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    NULL};
static const char *const rx_ufakzeka[] = {
    "[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    NULL};
static const char *const rx_grok_2[] = {
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    NULL};
static const char *const rx_afmoe[] = {
    "\\p{AFMoE_digits}",
    "[一-鿿㐀-䶿豈-﫿぀-ゟ゠-ヿ･-ﾟ⼀-⿟เ-๿຀-໿ក-៿က-႟ꩠ-ꩿꧠ-꧿가-힯ᄀ-ᇿ]+",
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\\r\\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    NULL};
static const char *const rx_laguna[] = {
    "[^\\n]+|[\\n]+",
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    NULL};
static const char *const rx_exaone_moe[] = {
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?(?:\\p{L}\\p{M}*(?: \\p{L}\\p{M}*)*)+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]?|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+",
    NULL};
static const char *const rx_gemma4[] = {
    "[^\\n]+|[\\n]+",
    NULL};
static const char *const rx_sarvam_moe[] = {
    "[^\\n]+|[\\n]+",
    NULL};
static const char *const rx_minicpm5[] = {
    "\\p{N}{1,3}",
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}+| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    NULL};
static const char *const rx_default[] = {
    "[\\p{P}\\$\\+<=>\\^~\\|]+",
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)",
    "\\p{N}+",
    "[0-9][0-9][0-9]",
    NULL};

/* tokenizer.ggml.pre names -> regex list and vocabulary flags. */
#define NC TOK_PRE_NO_CLEAN_SPACES
#define IM TOK_PRE_IGNORE_MERGES
#define AB TOK_PRE_ADD_BOS
static const struct {
    const char *name;
    const char *const *regex;
    unsigned flags;
} pre_table[] = {
    {"default", rx_default, 0},
    {"minicpm5", rx_minicpm5, IM},
    {"llama3", rx_llama3, IM | AB},
    {"llama-v3", rx_llama3, IM | AB},
    {"llama-bpe", rx_llama3, IM | AB},
    {"falcon3", rx_llama3, IM | AB},
    {"falcon-h1", rx_llama3, IM | AB},
    {"pixtral", rx_llama3, IM | AB},
    {"midm-2.0", rx_llama3, IM | AB},
    {"lfm2", rx_llama3, IM | AB},
    {"jina-v5-nano", rx_llama3, IM | AB},
    {"deepseek-llm", rx_deepseek_llm, NC},
    {"deepseek-coder", rx_deepseek_coder, NC},
    {"deepseek-v3", rx_deepseek3_llm, NC},
    {"spark2_5", rx_spark2_5, NC},
    {"youtu", rx_youtu, NC | IM},
    {"falcon", rx_falcon, 0},
    {"mpt", rx_gpt2, 0},
    {"starcoder", rx_starcoder, 0},
    {"gpt-2", rx_gpt2, 0},
    {"phi-2", rx_gpt2, 0},
    {"jina-es", rx_gpt2, 0},
    {"jina-de", rx_gpt2, 0},
    {"gigachat", rx_gpt2, 0},
    {"jina-v2-es", rx_gpt2, 0},
    {"jina-v2-de", rx_gpt2, 0},
    {"a.x-4.0", rx_gpt2, 0},
    {"mellum", rx_gpt2, 0},
    {"modern-bert", rx_gpt2, 0},
    {"jais-2", rx_jais2, 0},
    {"gemma4", rx_gemma4, TOK_PRE_ESCAPE_WS | TOK_PRE_RAW_UTF8},
    {"granite-embed-multi-311m", rx_gemma4, TOK_PRE_ESCAPE_WS | TOK_PRE_RAW_UTF8},
    {"sarvam-moe", rx_sarvam_moe, TOK_PRE_ESCAPE_WS | TOK_PRE_RAW_UTF8 | NC},
    {"jina-v1-en", rx_gpt2, TOK_PRE_ADD_SEP},
    {"jina-v2-code", rx_gpt2, TOK_PRE_ADD_SEP},
    {"roberta-bpe", rx_gpt2, TOK_PRE_ADD_SEP},
    {"refact", rx_starcoder, 0},
    {"command-r", rx_starcoder, NC},
    {"qwen2", rx_qwen2, NC},
    {"deepseek-r1-qwen", rx_qwen2, NC},
    {"kormo", rx_qwen2, NC},
    {"f2llmv2", rx_qwen2, NC},
    {"qwen35", rx_qwen35, NC},
    {"stablelm2", rx_qwen2, 0},
    {"olmo", rx_gpt2, 0},
    {"dbrx", rx_dbrx, 0},
    {"smaug-bpe", rx_dbrx, 0},
    {"poro-chat", rx_poro, NC},
    {"glm4", rx_chatglm4, TOK_PRE_NO_BOS},
    {"chatglm-bpe", rx_chatglm4, TOK_PRE_NO_BOS},
    {"viking", rx_viking, NC},
    {"jais", rx_gpt2, 0},
    {"tekken", rx_tekken, NC | IM | AB},
    {"smollm", rx_starcoder, NC},
    {"codeshell", rx_starcoder, 0},
    {"bloom", rx_poro, 0},
    {"gpt3-finnish", rx_poro, 0},
    {"exaone", rx_starcoder, 0},
    {"exaone4", rx_gpt2, 0},
    {"exaone-moe", rx_exaone_moe, 0},
    {"chameleon", rx_chameleon, AB | NC},
    {"minerva-7b", rx_starcoder, 0},
    {"megrez", rx_qwen2, 0},
    {"gpt-4o", rx_gpt4o, NC},
    {"llama4", rx_gpt4o, NC},
    {"kanana2", rx_gpt4o, NC},
    {"talkie", rx_gpt4o, NC},
    {"granite-embed-multi-97m", rx_granite_emb_multi, NC | IM},
    {"tiny_aya", rx_tiny_aya, NC},
    {"cohere2moe", rx_tiny_aya, NC},
    {"superbpe", rx_superbpe, NC},
    {"trillion", rx_gpt2, NC},
    {"granite-docling", rx_gpt2, NC},
    {"bailingmoe", rx_bailingmoe, NC},
    {"bailingmoe2", rx_bailingmoe, NC},
    {"llada-moe", rx_bailingmoe, NC},
    {"seed-coder", rx_seed_coder, NC},
    {"hunyuan", rx_qwen2, NC},
    {"hunyuan-dense", rx_deepseek3_llm, NC},
    {"hy_v4", rx_deepseek3_llm, NC},
    {"joyai-llm", rx_deepseek3_llm, NC},
    {"ufakzeka", rx_ufakzeka, NC},
    {"grok-2", rx_grok_2, NC},
    {"afmoe", rx_afmoe, NC},
    {"laguna", rx_laguna, NC},
    {"minimax-m2", rx_gpt4o, NC},
    {"solar-open", rx_qwen2, NC},
    {"mellum2", rx_starcoder, 0},
};
#undef NC
#undef IM
#undef AB

braid_status tok_pre_lookup(const char *name, unsigned *flags, const char *const **regex) {
    if (!name || !*name) name = "default";
    for (size_t i = 0; i < sizeof pre_table / sizeof pre_table[0]; i++) {
        if (!strcmp(pre_table[i].name, name)) {
            *flags = pre_table[i].flags;
            *regex = pre_table[i].regex;
            return BRAID_OK;
        }
    }
    return bd_error(BRAID_E_UNSUPPORTED, "tokenizer: unsupported pre-tokenizer '%s'", name);
}

/* ---- steps ------------------------------------------------------------------------------------------- */

typedef enum step_kind {
    STEP_PCRE,        /* a regex run with llama.cpp's std::regex semantics */
    STEP_GPT2,        /* 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S) */
    STEP_LLAMA3,      /* llama-3: contractions (any case), letters, digits by 3, punctuation, newlines */
    STEP_QWEN2,       /* as llama-3 with single digits */
    STEP_QWEN35,      /* as qwen2 with combining marks joining letters */
    STEP_NEWLINES,    /* [^\n]+|[\n]+ */
    STEP_AFMOE_DIGITS,/* digit runs in groups of three from the right */
    STEP_TRAILING_WS, /* \s+$ : the whitespace at the end of each piece (linear instead of std::regex's O(n^2)) */
} step_kind;

typedef struct step {
    step_kind kind;
    int collapsed;      /* PCRE: run on the collapsed text (the regex uses \p{..}) */
    int newline_safe;   /* see tok_pretok_newline_cuttable */
    int isolates_newlines;
    pcre2_code *code;
} step;

struct tok_pretok {
    step *steps;
    size_t n_steps;
    int need_collapsed, need_wide;
};

/* The \p{..} names llama.cpp resolves in regexes, their collapsed byte and the ASCII members of the class. */
static const struct {
    const char *name;
    uint32_t byte;
    const char *ascii;
} ucat[] = {
    {"\\p{N}", 0xD1, "0-9"},
    {"\\p{L}", 0xD2, "A-Za-z"},
    {"\\p{P}", 0xD3, "!-#%-*,-/:-;?-@\\[-\\]_\\{\\}"},
    {"\\p{M}", 0xD4, ""},
    {"\\p{S}", 0xD5, "\\$\\+<->^`\\|\\~"},
    {"\\p{Lu}", 0xD2, "A-Za-z"},
    {"\\p{Ll}", 0xD2, "A-Za-z"},
    {"\\p{Lt}", 0xD2, "A-Za-z"},
    {"\\p{Lm}", 0xD2, "A-Za-z"},
    {"\\p{Lo}", 0xD2, "A-Za-z"},
};

static int uses_ucat(const char *rx) {
    for (size_t k = 0; k < sizeof ucat / sizeof ucat[0]; k++)
        if (strstr(rx, ucat[k].name)) return 1;
    return 0;
}

/* Builds the 32-bit pattern: collapsed (\p{..} replaced as llama.cpp does, bytes as units) or the regex's
 * codepoints. Returns the unit count; out has room for 4 * strlen(rx) + 64 units. */
static size_t build_pattern(const char *rx, int collapsed, uint32_t *out) {
    size_t n = 0, len = strlen(rx);
    if (!collapsed) {
        for (size_t i = 0; i < len;) out[n++] = tok_utf8_decode((const uint8_t *)rx, len, &i);
        return n;
    }
    int inside = 0;
    for (size_t i = 0; i < len; i++) {
        char c = rx[i];
        if (c == '[' && (i == 0 || rx[i - 1] != '\\')) {
            out[n++] = '[';
            inside = 1;
            continue;
        }
        if (inside && c == ']' && rx[i - 1] != '\\') {
            out[n++] = ']';
            inside = 0;
            continue;
        }
        if (c == '\\' && i + 3 < len && rx[i + 1] == 'p' && rx[i + 2] == '{') {
            const char *close = strchr(rx + i + 3, '}');
            if (close && (size_t)(close - rx) <= i + 10) {
                size_t plen = (size_t)(close - rx) - i + 1;
                size_t k;
                for (k = 0; k < sizeof ucat / sizeof ucat[0]; k++)
                    if (strlen(ucat[k].name) == plen && !memcmp(ucat[k].name, rx + i, plen)) break;
                if (k < sizeof ucat / sizeof ucat[0]) {
                    if (!inside) out[n++] = '[';
                    out[n++] = ucat[k].byte;
                    for (const char *a = ucat[k].ascii; *a; a++) out[n++] = (uint8_t)*a;
                    if (!inside) out[n++] = ']';
                    i += plen - 1;
                    continue;
                }
            }
        }
        out[n++] = (uint8_t)c;
    }
    return n;
}

/* Regexes whose matches never contain '\n' (so a cut after a '\n' between printable ASCII characters cannot
 * split a match). */
static int regex_newline_free(const char *rx) {
    static const char *const ok[] = {"\\p{N}", "\\p{N}+", "\\p{N}{1,3}", "[0-9][0-9][0-9]",
                                     "[\\p{P}\\$\\+<=>\\^~\\|`]+", "[\\p{P}\\$\\+<=>\\^~\\|]+"};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
        if (!strcmp(rx, ok[i])) return 1;
    return 0;
}

void tok_pretok_free(tok_pretok *p) {
    if (!p) return;
    for (size_t i = 0; i < p->n_steps; i++) pcre2_code_free(p->steps[i].code);
    bd_free(p->steps);
    bd_free(p);
}

braid_status tok_pretok_new(const char *const *regex, tok_pretok **out) {
    size_t n = 0;
    while (regex[n]) n++;
    tok_pretok *p = bd_calloc(1, sizeof *p);
    if (!p) return bd_error(BRAID_E_NOMEM, "tokenizer: out of memory");
    p->steps = bd_calloc(n ? n : 1, sizeof *p->steps);
    if (!p->steps) {
        bd_free(p);
        return bd_error(BRAID_E_NOMEM, "tokenizer: out of memory");
    }
    p->n_steps = n;
    int isolated = 0;
    for (size_t i = 0; i < n; i++) {
        const char *rx = regex[i];
        step *s = &p->steps[i];
        s->newline_safe = 1;
        if (!strcmp(rx, "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"))
            s->kind = STEP_GPT2;
        else if (!strcmp(rx, "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
                             "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"))
            s->kind = STEP_LLAMA3;
        else if (!strcmp(rx, "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
                             "\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"))
            s->kind = STEP_QWEN2;
        else if (!strcmp(rx, "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?"
                             "[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"))
            s->kind = STEP_QWEN35;
        else if (!strcmp(rx, "[^\\n]+|[\\n]+"))
            s->kind = STEP_NEWLINES;
        else if (!strcmp(rx, "\\p{AFMoE_digits}") || !strcmp(rx, "\\d{1,3}(?=(?:\\d{3})*\\b)"))
            s->kind = STEP_AFMOE_DIGITS;
        else if (!strcmp(rx, "\\s+$"))
            s->kind = STEP_TRAILING_WS;
        else {
            s->kind = STEP_PCRE;
            s->collapsed = uses_ucat(rx);
            s->newline_safe = isolated || regex_newline_free(rx);
            if (s->collapsed) p->need_collapsed = 1;
            else p->need_wide = 1;
            size_t cap = strlen(rx) * 4 + 64;
            uint32_t *pat = bd_mallocn(cap, sizeof *pat);
            if (!pat) {
                tok_pretok_free(p);
                return bd_error(BRAID_E_NOMEM, "tokenizer: out of memory");
            }
            size_t plen = build_pattern(rx, s->collapsed, pat);
            int err;
            PCRE2_SIZE erroff;
            s->code = pcre2_compile(pat, plen, PCRE2_DOLLAR_ENDONLY, &err, &erroff, NULL);
            bd_free(pat);
            if (!s->code) {
                PCRE2_UCHAR msg[256];
                pcre2_get_error_message(err, msg, 256);
                char m8[256];
                size_t k = 0;
                for (; k < 255 && msg[k]; k++) m8[k] = (char)(msg[k] < 128 ? msg[k] : '?');
                m8[k] = 0;
                tok_pretok_free(p);
                return bd_error(BRAID_E_UNSUPPORTED, "tokenizer: pre-tokenizer regex %zu does not compile (%s at %zu)",
                                i, m8, (size_t)erroff);
            }
            /* JIT if the platform has it; the interpreter gives the same matches otherwise. */
            (void)pcre2_jit_compile(s->code, PCRE2_JIT_COMPLETE);
            if (!strcmp(rx, "[\r\n]")) s->isolates_newlines = 1;
        }
        if (s->kind == STEP_NEWLINES || s->isolates_newlines) isolated = 1;
    }
    *out = p;
    return BRAID_OK;
}

int tok_pretok_newline_cuttable(const tok_pretok *p) {
    for (size_t i = 0; i < p->n_steps; i++)
        if (!p->steps[i].newline_safe) return 0;
    return 1;
}

void tok_pretok_scratch_free(tok_pretok_scratch *s) {
    bd_free(s->lens[0]);
    bd_free(s->lens[1]);
    bd_free(s->xtext);
    if (s->match_data) pcre2_match_data_free(s->match_data);
    if (s->match_ctx) pcre2_match_context_free(s->match_ctx);
    if (s->jit_stack) pcre2_jit_stack_free(s->jit_stack);
    memset(s, 0, sizeof *s);
}

/* ---- hand-written splitters ------------------------------------------------------------------------- */

/* A growable list of word lengths. */
typedef struct lens_out {
    uint32_t **buf;
    size_t *cap;
    size_t n;
    int failed;
} lens_out;

static void lens_push(lens_out *o, size_t len) {
    if (o->failed) return;
    if (o->n == *o->cap) {
        size_t cap = *o->cap ? *o->cap * 2 : 256;
        uint32_t *b = bd_realloc(*o->buf, cap * sizeof *b);
        if (!b) {
            o->failed = 1;
            return;
        }
        *o->buf = b;
        *o->cap = cap;
    }
    (*o->buf)[o->n++] = (uint32_t)len;
}

/* Codepoint classes seen by the splitters: outside the current piece nothing matches (llama.cpp's empty
 * flags), which IN_RANGE distinguishes from an in-range codepoint of class 0 (unassigned). */
#define OOR 0xFFFFFFFFu
typedef struct piece {
    const uint32_t *cp;
    size_t ini, end, prev_end;
    lens_out *out;
} piece;

static inline uint32_t pc_cp(const piece *p, size_t pos) { return pos >= p->ini && pos < p->end ? p->cp[pos] : OOR; }
static inline int pc_in(const piece *p, size_t pos) { return pos >= p->ini && pos < p->end; }
static inline int pc_cat(const piece *p, size_t pos) { return pc_in(p, pos) ? tok_uc_cat(p->cp[pos]) : -1; }
static inline int pc_letter(const piece *p, size_t pos) { return pc_cat(p, pos) == TOK_UC_LETTER; }
static inline int pc_number(const piece *p, size_t pos) { return pc_cat(p, pos) == TOK_UC_NUMBER; }
static inline int pc_mark(const piece *p, size_t pos) { return pc_cat(p, pos) == TOK_UC_MARK; }
static inline int pc_ws(const piece *p, size_t pos) { return pc_in(p, pos) && tok_uc_is_ws(p->cp[pos]); }
static inline size_t pc_add(piece *p, size_t end) {
    size_t len = end - p->prev_end;
    if (len > 0) lens_push(p->out, len);
    p->prev_end = end;
    return len;
}
static inline uint32_t ascii_lower(uint32_t c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; }

/* Contractions 's 't 'm 'd 're 've 'll at pos (lower: compare case-insensitively). Returns the match length
 * (2 or 3) or 0. */
static size_t contraction(const piece *p, size_t pos, int lower) {
    if (pc_cp(p, pos) != '\'' || pos + 1 >= p->end) return 0;
    uint32_t a = pc_cp(p, pos + 1);
    if (lower) a = ascii_lower(a);
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
    if (pos + 2 < p->end) {
        uint32_t b = pc_cp(p, pos + 2);
        if (lower) b = ascii_lower(b);
        if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
    }
    return 0;
}

/* Whitespace handling shared by the splitters: \s*[\r\n]+ (if newlines), \s+(?!\S), \s+. Returns 1 if it
 * consumed something. */
static int split_ws(piece *p, size_t *pos, int newlines) {
    size_t n_ws = 0, last_nl = 0;
    while (pc_ws(p, *pos + n_ws)) {
        uint32_t c = pc_cp(p, *pos + n_ws);
        if (c == '\r' || c == '\n') last_nl = *pos + n_ws + 1;
        n_ws++;
    }
    if (newlines && last_nl > 0) {
        *pos = last_nl;
        pc_add(p, *pos);
        return 1;
    }
    if (n_ws > 1 && pc_cp(p, *pos + n_ws) != OOR) {
        *pos += n_ws - 1;
        pc_add(p, *pos);
        return 1;
    }
    if (n_ws > 0) {
        *pos += n_ws;
        pc_add(p, *pos);
        return 1;
    }
    return 0;
}

static void split_gpt2(piece *p) {
    for (size_t pos = p->ini; pos < p->end;) {
        uint32_t c = p->cp[pos];
        size_t k = contraction(p, pos, 0);
        if (k) {
            pos += pc_add(p, pos + k);
            continue;
        }
        size_t q = c == ' ' ? pos + 1 : pos; /* where the class test looks */
        if (pc_letter(p, q)) {
            pos = q;
            while (pc_letter(p, pos)) pos++;
            pc_add(p, pos);
            continue;
        }
        if (pc_number(p, q)) {
            pos = q;
            while (pc_number(p, pos)) pos++;
            pc_add(p, pos);
            continue;
        }
        if (pc_in(p, q) && !pc_ws(p, q) && !pc_letter(p, q) && !pc_number(p, q)) {
            pos = q;
            while (pc_in(p, pos) && !pc_ws(p, pos) && !pc_letter(p, pos) && !pc_number(p, pos)) pos++;
            pc_add(p, pos);
            continue;
        }
        if (split_ws(p, &pos, 0)) continue;
        pc_add(p, ++pos);
    }
}

/* llama-3 (max_digits 3), qwen2 (1), qwen3.5 (1, marks join letters). */
static void split_llama3(piece *p, int max_digits, int marks) {
    for (size_t pos = p->ini; pos < p->end;) {
        uint32_t c = p->cp[pos];
        size_t k = contraction(p, pos, 1);
        if (k) {
            pos += pc_add(p, pos + k);
            continue;
        }
        /* [^\r\n\p{L}\p{N}]?\p{L}+   (qwen3.5: [\p{L}\p{M}]+) */
        if (!(c == '\r' || c == '\n' || pc_number(p, pos))) {
            int here = pc_letter(p, pos) || (marks && pc_mark(p, pos));
            int next = pc_letter(p, pos + 1) || (marks && pc_mark(p, pos + 1));
            if (here || next) {
                pos++;
                while (pc_letter(p, pos) || (marks && pc_mark(p, pos))) pos++;
                pc_add(p, pos);
                continue;
            }
        }
        if (pc_number(p, pos)) {
            if (max_digits == 1) {
                pc_add(p, ++pos);
                continue;
            }
            size_t ini = pos;
            while (pc_number(p, pos)) {
                if (++pos - ini >= (size_t)max_digits) {
                    pc_add(p, pos);
                    ini = pos;
                }
            }
            pc_add(p, pos);
            continue;
        }
        /*  ?[^\s\p{L}\p{N}]+[\r\n]*   (qwen3.5 also excludes \p{M}); the first test is on the current
         * codepoint being in range, as in llama.cpp. */
        size_t q = c == ' ' ? pos + 1 : pos;
#define PUNCT_AT(x) (pc_in(p, x) && !pc_ws(p, x) && !pc_letter(p, x) && !pc_number(p, x) && !(marks && pc_mark(p, x)))
        if ((pc_in(p, q) ? PUNCT_AT(q) : 1)) {
            pos = q;
            while (PUNCT_AT(pos)) pos++;
            while (pc_cp(p, pos) == '\r' || pc_cp(p, pos) == '\n') pos++;
            pc_add(p, pos);
            continue;
        }
#undef PUNCT_AT
        if (split_ws(p, &pos, 1)) continue;
        pc_add(p, ++pos);
    }
}

static void split_newlines(piece *p) {
    size_t pos = p->ini;
    while (pos < p->end) {
        int nl = p->cp[pos] == '\n';
        size_t start = pos;
        while (pos < p->end && (p->cp[pos] == '\n') == nl) pos++;
        lens_push(p->out, pos - start);
    }
}

static void split_afmoe_digits(piece *p) {
    for (size_t pos = p->ini; pos < p->end;) {
        if (pc_number(p, pos)) {
            size_t start = pos, count = 0;
            while (pos < p->end && pc_number(p, pos)) {
                count++;
                pos++;
            }
            size_t cur = start, rem = count % 3;
            if (rem) {
                pc_add(p, cur + rem);
                cur += rem;
            }
            while (cur < start + count) {
                pc_add(p, cur + 3);
                cur += 3;
            }
            continue;
        }
        pos++;
    }
    if (p->prev_end < p->end) pc_add(p, p->end);
}

static void split_trailing_ws(piece *p) {
    size_t s = p->end;
    while (s > p->ini && tok_uc_is_ws(p->cp[s - 1])) s--;
    if (s > p->ini) lens_push(p->out, s - p->ini);
    if (s < p->end) lens_push(p->out, p->end - s);
}

/* ---- PCRE2 steps with std::regex_iterator semantics ----------------------------------------------------- */

static braid_status pcre_error(int rc) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(rc, msg, 256);
    char m8[256];
    size_t k = 0;
    for (; k < 255 && msg[k]; k++) m8[k] = (char)(msg[k] < 128 ? msg[k] : '?');
    m8[k] = 0;
    return bd_error(BRAID_E_UNSUPPORTED, "tokenizer: pre-tokenizer regex failed: %s", m8);
}

/* Splits one piece (subject = xtext[ini..end)): matches and the gaps between them, in order, zero-length
 * matches included (llama.cpp pushes them too). */
static braid_status split_pcre(const step *st, tok_pretok_scratch *s, const uint32_t *x, size_t ini, size_t end,
                               lens_out *out) {
    const PCRE2_SPTR subj = x + ini;
    PCRE2_SIZE len = end - ini, start = 0, last = 0;
    uint32_t opts = 0;
    pcre2_match_data *md = s->match_data;
    for (;;) {
        if (start > len) break;
        int rc = pcre2_match(st->code, subj, len, start, opts, md, s->match_ctx);
        if (rc == PCRE2_ERROR_NOMATCH) {
            if (opts) { /* no non-empty match at the empty match's position: move on one unit */
                opts = 0;
                start++;
                continue;
            }
            break;
        }
        if (rc < 0) return pcre_error(rc);
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        PCRE2_SIZE mpos = ov[0], mend = ov[1];
        if (mpos > last) lens_push(out, mpos - last);
        lens_push(out, mend - mpos);
        last = mend;
        if (mend == mpos) {
            start = mend;
            opts = PCRE2_NOTEMPTY_ATSTART | PCRE2_ANCHORED;
        } else {
            start = mend;
            opts = 0;
        }
    }
    if (last < len) lens_push(out, len - last);
    return BRAID_OK;
}

/* ---- driver ---------------------------------------------------------------------------------------- */

static braid_status ensure_scratch(const tok_pretok *p, tok_pretok_scratch *s, size_t n) {
    if ((p->need_collapsed || p->need_wide) && !s->match_data) {
        s->match_data = pcre2_match_data_create(1, NULL);
        s->match_ctx = pcre2_match_context_create(NULL);
        s->jit_stack = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, NULL);
        if (!s->match_data || !s->match_ctx || !s->jit_stack)
            return bd_error(BRAID_E_NOMEM, "tokenizer: out of memory for regex matching");
        pcre2_jit_stack_assign(s->match_ctx, NULL, s->jit_stack);
    }
    if ((p->need_collapsed || p->need_wide) && s->xtext_cap < n * (size_t)(p->need_collapsed + p->need_wide)) {
        size_t cap = n * (size_t)(p->need_collapsed + p->need_wide) + 64;
        uint32_t *x = bd_mallocn(cap, sizeof *x);
        if (!x) return bd_error(BRAID_E_NOMEM, "tokenizer: out of memory (%zu codepoints)", n);
        bd_free(s->xtext);
        s->xtext = x;
        s->xtext_cap = cap;
    }
    return BRAID_OK;
}

static uint32_t collapse(uint32_t c) {
    if (c < 128) return c;
    uint8_t k = tok_uc_class(c);
    if (k & TOK_UC_WS) return 0x0B;
    switch (k & TOK_UC_CAT_MASK) {
    case TOK_UC_NUMBER: return 0xD1;
    case TOK_UC_LETTER: return 0xD2;
    case TOK_UC_PUNCT: return 0xD3;
    case TOK_UC_MARK: return 0xD4;
    case TOK_UC_SYMBOL: return 0xD5;
    default: return 0xD0;
    }
}

braid_status tok_pretok_split(const tok_pretok *p, tok_pretok_scratch *s, const uint32_t *cp, size_t n,
                              const uint32_t **lens, size_t *n_lens) {
    BD_TRY(ensure_scratch(p, s, n));
    uint32_t *xc = NULL, *xw = NULL;
    if (p->need_collapsed) {
        xc = s->xtext;
        for (size_t i = 0; i < n; i++) xc[i] = collapse(cp[i]);
    }
    if (p->need_wide) {
        xw = s->xtext + (p->need_collapsed ? n : 0);
        for (size_t i = 0; i < n; i++) xw[i] = cp[i] > 0x7F && tok_uc_is_ws(cp[i]) ? 0x0B : cp[i];
    }
    /* The pieces start as one piece: the whole text. */
    int cur = 0;
    lens_out o0 = {&s->lens[0], &s->lens_cap[0], 0, 0};
    lens_push(&o0, n);
    if (o0.failed) return bd_error(BRAID_E_NOMEM, "tokenizer: out of memory");
    size_t n_cur = o0.n;
    for (size_t k = 0; k < p->n_steps; k++) {
        const step *st = &p->steps[k];
        lens_out o = {&s->lens[cur ^ 1], &s->lens_cap[cur ^ 1], 0, 0};
        size_t start = 0;
        for (size_t i = 0; i < n_cur; i++) {
            size_t len = s->lens[cur][i];
            piece pc = {cp, start, start + len, start, &o};
            switch (st->kind) {
            case STEP_GPT2: split_gpt2(&pc); break;
            case STEP_LLAMA3: split_llama3(&pc, 3, 0); break;
            case STEP_QWEN2: split_llama3(&pc, 1, 0); break;
            case STEP_QWEN35: split_llama3(&pc, 1, 1); break;
            case STEP_NEWLINES: split_newlines(&pc); break;
            case STEP_AFMOE_DIGITS: split_afmoe_digits(&pc); break;
            case STEP_TRAILING_WS: split_trailing_ws(&pc); break;
            case STEP_PCRE: BD_TRY(split_pcre(st, s, st->collapsed ? xc : xw, start, start + len, &o)); break;
            }
            start += len;
        }
        if (o.failed) return bd_error(BRAID_E_NOMEM, "tokenizer: out of memory");
        cur ^= 1;
        n_cur = o.n;
    }
    *lens = s->lens[cur];
    *n_lens = n_cur;
    return BRAID_OK;
}
