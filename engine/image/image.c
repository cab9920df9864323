/* PNG (libpng) and JPEG (libjpeg-turbo, EXIF orientation through libexif)
 * decoding, the SAM / SAM 2 preprocessing and mask post-processing, PNG
 * writing. Decoders read from memory; both libraries report errors by
 * longjmp, so each setjmp lives in a small function whose state is in a
 * context owned by its caller (no automatic variable of the setjmp frame is
 * read after the jump). */
#include "engine/image/image.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jerror.h>
#include <jpeglib.h>
#include <libexif/exif-data.h>
#include <png.h>

/* The largest side rlx_image_preprocess makes (the tensor is 3 x t x t). */
#define MAX_TARGET 16384

rlx_image_load_params rlx_image_load_default_params(void)
{
    return (rlx_image_load_params){.max_pixels = RLX_IMAGE_DEFAULT_MAX_PIXELS,
                                   .apply_orientation = true};
}

void rlx_image_free(rlx_image *img)
{
    if (!img)
        return;
    free(img->rgb);
    free(img->alpha);
    free(img);
}

static const uint8_t png_magic[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};

const char *rlx_image_sniff(const void *data, size_t size)
{
    const uint8_t *d = data;
    if (!d)
        return NULL;
    if (size >= 8 && memcmp(d, png_magic, 8) == 0)
        return "PNG";
    if (size >= 3 && d[0] == 0xff && d[1] == 0xd8 && d[2] == 0xff)
        return "JPEG";
    return NULL;
}

/* Other image kinds, named so the refusal says what the file is. */
static const char *other_format(const uint8_t *d, size_t n)
{
    if (n >= 6 && (memcmp(d, "GIF87a", 6) == 0 || memcmp(d, "GIF89a", 6) == 0))
        return "GIF";
    if (n >= 12 && memcmp(d, "RIFF", 4) == 0 && memcmp(d + 8, "WEBP", 4) == 0)
        return "WebP";
    if (n >= 2 && d[0] == 'B' && d[1] == 'M')
        return "BMP";
    if (n >= 4 && (memcmp(d, "II*\0", 4) == 0 || memcmp(d, "MM\0*", 4) == 0))
        return "TIFF";
    if (n >= 12 && memcmp(d + 4, "ftyp", 4) == 0 &&
        (memcmp(d + 8, "heic", 4) == 0 || memcmp(d + 8, "heix", 4) == 0 ||
         memcmp(d + 8, "mif1", 4) == 0 || memcmp(d + 8, "avif", 4) == 0))
        return "HEIF/AVIF";
    if (n >= 4 && memcmp(d, "\0\0\1\0", 4) == 0)
        return "ICO";
    return NULL;
}

static rlx_status too_many_pixels(rlx_error **err, uint64_t w, uint64_t h, int64_t max_pixels)
{
    return rlx_error_set(err, RLX_ERR_UNSUPPORTED,
                         "the image is %llu\u00d7%llu pixels, more than the %g megapixels RLX "
                         "reads; scale it down first",
                         (unsigned long long)w, (unsigned long long)h, (double)max_pixels / 1e6);
}

/* Splits interleaved RGBA (or keeps RGB) into an rlx_image; takes `buf`. */
static rlx_status image_from_buffer(uint8_t *buf, int w, int h, int channels, rlx_image **out,
                                    rlx_error **err)
{
    rlx_image *img = calloc(1, sizeof *img);
    if (!img) {
        free(buf);
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory decoding the image");
    }
    img->width = w;
    img->height = h;
    size_t n = (size_t)w * h;
    if (channels == 3) {
        img->rgb = buf;
    } else {
        img->rgb = malloc(n * 3);
        img->alpha = malloc(n);
        if (!img->rgb || !img->alpha) {
            free(buf);
            rlx_image_free(img);
            return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory decoding the image");
        }
        for (size_t i = 0; i < n; i++) {
            memcpy(img->rgb + i * 3, buf + i * 4, 3);
            img->alpha[i] = buf[i * 4 + 3];
        }
        free(buf);
    }
    *out = img;
    return RLX_OK;
}

/* ---- PNG ---------------------------------------------------------------- */

typedef struct png_ctx {
    const uint8_t *data;
    size_t size, pos;
    int64_t max_pixels;
    png_structp png;
    png_infop info;
    uint8_t *buf;
    png_bytep *rows;
    png_uint_32 w, h;
    int channels;
    bool too_big;
    char msg[256];
} png_ctx;

static void png_read_mem(png_structp png, png_bytep out, size_t len)
{
    png_ctx *c = png_get_io_ptr(png);
    if (len > c->size - c->pos)
        png_error(png, "the PNG is truncated: it ends in the middle of its data");
    memcpy(out, c->data + c->pos, len);
    c->pos += len;
}

static void png_on_error(png_structp png, png_const_charp msg)
{
    png_ctx *c = png_get_error_ptr(png);
    if (c && !c->msg[0])
        snprintf(c->msg, sizeof c->msg, "%s", msg);
    png_longjmp(png, 1);
}

static void png_on_warning(png_structp png, png_const_charp msg)
{
    (void)png;
    (void)msg; /* ancillary-chunk trouble: the pixels are still good */
}

static int png_decode_run(png_ctx *c)
{
    if (setjmp(png_jmpbuf(c->png)))
        return -1;
    png_set_read_fn(c->png, c, png_read_mem);
    /* libpng's own 1e6-per-side limit would refuse a wide strip with a vaguer
     * message; max_pixels below decides, before any row is allocated */
    png_set_user_limits(c->png, PNG_UINT_31_MAX, PNG_UINT_31_MAX);
    png_read_info(c->png, c->info);
    int bit_depth, color_type, interlace;
    png_get_IHDR(c->png, c->info, &c->w, &c->h, &bit_depth, &color_type, &interlace, NULL, NULL);
    if ((uint64_t)c->w * c->h > (uint64_t)c->max_pixels) {
        c->too_big = true;
        return -1;
    }
    bool trns = png_get_valid(c->png, c->info, PNG_INFO_tRNS) != 0;
    if (color_type == PNG_COLOR_TYPE_PALETTE)
        png_set_palette_to_rgb(c->png);
    if (color_type == PNG_COLOR_TYPE_GRAY && bit_depth < 8)
        png_set_expand_gray_1_2_4_to_8(c->png);
    if (trns)
        png_set_tRNS_to_alpha(c->png);
    if (bit_depth == 16)
        png_set_strip_16(c->png);
    if (color_type == PNG_COLOR_TYPE_GRAY || color_type == PNG_COLOR_TYPE_GRAY_ALPHA)
        png_set_gray_to_rgb(c->png);
    c->channels = ((color_type & PNG_COLOR_MASK_ALPHA) || trns) ? 4 : 3;
    png_set_interlace_handling(c->png);
    png_read_update_info(c->png, c->info);
    if (png_get_rowbytes(c->png, c->info) != (size_t)c->w * c->channels)
        png_error(c->png, "unexpected row layout after conversion");
    c->buf = malloc((size_t)c->w * c->h * c->channels);
    c->rows = malloc((size_t)c->h * sizeof *c->rows);
    if (!c->buf || !c->rows)
        png_error(c->png, "out of memory");
    for (png_uint_32 y = 0; y < c->h; y++)
        c->rows[y] = c->buf + (size_t)y * c->w * c->channels;
    png_read_image(c->png, c->rows);
    /* the last IDAT's CRC and IEND: a file cut there is truncated too */
    png_read_end(c->png, NULL);
    return 0;
}

static rlx_status decode_png(const uint8_t *data, size_t size, const rlx_image_load_params *p,
                             rlx_image **out, rlx_error **err)
{
    png_ctx c = {.data = data, .size = size, .max_pixels = p->max_pixels};
    c.png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &c, png_on_error, png_on_warning);
    if (c.png)
        c.info = png_create_info_struct(c.png);
    if (!c.png || !c.info) {
        png_destroy_read_struct(&c.png, NULL, NULL);
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory decoding the PNG");
    }
    int rc = png_decode_run(&c);
    png_destroy_read_struct(&c.png, &c.info, NULL);
    free(c.rows);
    if (rc != 0) {
        free(c.buf);
        if (c.too_big)
            return too_many_pixels(err, c.w, c.h, p->max_pixels);
        if (strcmp(c.msg, "out of memory") == 0)
            return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory decoding the PNG");
        if (strncmp(c.msg, "the PNG", 7) == 0)
            return rlx_error_set(err, RLX_ERR_FORMAT, "%s", c.msg);
        return rlx_error_set(err, RLX_ERR_FORMAT, "the PNG is corrupt (libpng: %s)", c.msg);
    }
    return image_from_buffer(c.buf, (int)c.w, (int)c.h, c.channels, out, err);
}

/* ---- JPEG --------------------------------------------------------------- */

typedef struct jpg_err {
    struct jpeg_error_mgr mgr; /* first: libjpeg hands us this pointer */
    jmp_buf jb;
    bool truncated;
    char msg[JMSG_LENGTH_MAX];
} jpg_err;

typedef struct jpg_ctx {
    struct jpeg_decompress_struct ci;
    jpg_err e;
    const uint8_t *data;
    size_t size;
    int64_t max_pixels;
    bool want_orientation;
    int orientation;
    bool too_big;
    uint8_t *buf, *row;
    unsigned w, h;
} jpg_ctx;

static void jpg_error_exit(j_common_ptr ci)
{
    jpg_err *e = (jpg_err *)ci->err;
    (*ci->err->format_message)(ci, e->msg);
    longjmp(e->jb, 1);
}

/* libjpeg pads a file that ends early with gray and only warns; a cut-off
 * photo must be refused, not segmented half gray. */
static void jpg_emit_message(j_common_ptr ci, int level)
{
    jpg_err *e = (jpg_err *)ci->err;
    if (level < 0 && ci->err->msg_code == JWRN_JPEG_EOF) {
        e->truncated = true;
        longjmp(e->jb, 1);
    }
    if (level < 0)
        ci->err->num_warnings++;
}

static void jpg_output_message(j_common_ptr ci)
{
    (void)ci; /* no printing from a library */
}

/* The EXIF Orientation (1..8) in an APP1 "Exif\0\0" segment, 1 when absent. */
static int exif_orientation(const uint8_t *d, size_t n)
{
    if (n < 14 || memcmp(d, "Exif\0\0", 6) != 0 || n > UINT_MAX)
        return 1;
    ExifData *ed = exif_data_new();
    if (!ed)
        return 1;
    /* "following the specification" would add default tags; read only */
    exif_data_unset_option(ed, EXIF_DATA_OPTION_FOLLOW_SPECIFICATION);
    exif_data_load_data(ed, d, (unsigned int)n);
    int o = 1;
    ExifEntry *e = exif_content_get_entry(ed->ifd[EXIF_IFD_0], EXIF_TAG_ORIENTATION);
    if (e && e->format == EXIF_FORMAT_SHORT && e->components >= 1 && e->size >= 2 && e->data) {
        int v = exif_get_short(e->data, exif_data_get_byte_order(ed));
        if (v >= 1 && v <= 8)
            o = v;
    }
    exif_data_unref(ed);
    return o;
}

static inline uint8_t clip8i(int v)
{
    return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

static int jpg_decode_run(jpg_ctx *c)
{
    if (setjmp(c->e.jb))
        return -1;
    jpeg_create_decompress(&c->ci);
    jpeg_mem_src(&c->ci, c->data, (unsigned long)c->size);
    if (c->want_orientation)
        jpeg_save_markers(&c->ci, JPEG_APP0 + 1, 0xffff);
    jpeg_read_header(&c->ci, TRUE);
    c->w = c->ci.image_width;
    c->h = c->ci.image_height;
    if ((uint64_t)c->w * c->h > (uint64_t)c->max_pixels) {
        c->too_big = true;
        return -1;
    }
    for (jpeg_saved_marker_ptr m = c->ci.marker_list; m; m = m->next) {
        if (m->marker == JPEG_APP0 + 1 && m->data_length >= 6 &&
            memcmp(m->data, "Exif\0\0", 6) == 0) {
            c->orientation = exif_orientation(m->data, m->data_length);
            break;
        }
    }
    bool cmyk = c->ci.jpeg_color_space == JCS_CMYK || c->ci.jpeg_color_space == JCS_YCCK;
    c->ci.out_color_space = cmyk ? JCS_CMYK : JCS_RGB;
    jpeg_start_decompress(&c->ci);
    int comps = c->ci.output_components;
    if (c->ci.output_width != c->w || c->ci.output_height != c->h || comps != (cmyk ? 4 : 3)) {
        snprintf(c->e.msg, sizeof c->e.msg, "unexpected output layout");
        return -1;
    }
    c->buf = malloc((size_t)c->w * c->h * 3);
    c->row = malloc((size_t)c->w * 4);
    if (!c->buf || !c->row) {
        snprintf(c->e.msg, sizeof c->e.msg, "out of memory");
        return -1;
    }
    /* Adobe's CMYK JPEGs store inverted inks (PIL reads them as "CMYK;I"). */
    bool inverted = c->ci.saw_Adobe_marker;
    while (c->ci.output_scanline < c->h) {
        unsigned y = c->ci.output_scanline;
        JSAMPROW r = cmyk ? c->row : c->buf + (size_t)y * c->w * 3;
        if (jpeg_read_scanlines(&c->ci, &r, 1) != 1) {
            c->e.truncated = true;
            return -1;
        }
        if (cmyk) {
            uint8_t *o = c->buf + (size_t)y * c->w * 3;
            for (unsigned x = 0; x < c->w; x++) {
                /* PIL's cmyk2rgb: nk - nk * ink / 255, rounded as its MULDIV255 */
                int k = inverted ? 255 - c->row[x * 4 + 3] : c->row[x * 4 + 3];
                int nk = 255 - k;
                for (int ch = 0; ch < 3; ch++) {
                    int ink = inverted ? 255 - c->row[x * 4 + ch] : c->row[x * 4 + ch];
                    int t = ink * nk + 128;
                    o[x * 3 + ch] = clip8i(nk - (((t >> 8) + t) >> 8));
                }
            }
        }
    }
    jpeg_finish_decompress(&c->ci);
    return 0;
}

/* EXIF orientation: the source pixel of each upright output pixel. */
static uint8_t *orient(const uint8_t *src, int w, int h, int ch, int o, int *ow, int *oh)
{
    bool swap = o >= 5;
    int W = swap ? h : w, H = swap ? w : h;
    uint8_t *dst = malloc((size_t)W * H * ch);
    if (!dst)
        return NULL;
    for (int y = 0; y < H; y++) {
        for (int x = 0; x < W; x++) {
            int sx, sy;
            switch (o) {
            case 2:
                sx = w - 1 - x, sy = y;
                break;
            case 3:
                sx = w - 1 - x, sy = h - 1 - y;
                break;
            case 4:
                sx = x, sy = h - 1 - y;
                break;
            case 5:
                sx = y, sy = x;
                break; /* transpose */
            case 6:
                sx = y, sy = h - 1 - x;
                break; /* 90 degrees clockwise */
            case 7:
                sx = w - 1 - y, sy = h - 1 - x;
                break; /* transverse */
            case 8:
                sx = w - 1 - y, sy = x;
                break; /* 90 degrees counter-clockwise */
            default:
                sx = x, sy = y;
                break;
            }
            memcpy(dst + ((size_t)y * W + x) * ch, src + ((size_t)sy * w + sx) * ch, ch);
        }
    }
    *ow = W;
    *oh = H;
    return dst;
}

static rlx_status decode_jpeg(const uint8_t *data, size_t size, const rlx_image_load_params *p,
                              rlx_image **out, rlx_error **err)
{
    if (size > ULONG_MAX)
        return rlx_error_set(err, RLX_ERR_UNSUPPORTED, "the JPEG is too large");
    jpg_ctx *c = calloc(1, sizeof *c);
    if (!c)
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory decoding the JPEG");
    c->data = data;
    c->size = size;
    c->max_pixels = p->max_pixels;
    c->want_orientation = p->apply_orientation;
    c->orientation = 1;
    c->ci.err = jpeg_std_error(&c->e.mgr);
    c->e.mgr.error_exit = jpg_error_exit;
    c->e.mgr.emit_message = jpg_emit_message;
    c->e.mgr.output_message = jpg_output_message;
    int rc = jpg_decode_run(c);
    jpeg_destroy_decompress(&c->ci);
    free(c->row);
    rlx_status st = RLX_OK;
    if (rc != 0) {
        free(c->buf);
        if (c->too_big)
            st = too_many_pixels(err, c->w, c->h, p->max_pixels);
        else if (c->e.truncated)
            st = rlx_error_set(err, RLX_ERR_FORMAT,
                               "the JPEG is truncated: it ends before its image data does");
        else if (strcmp(c->e.msg, "out of memory") == 0)
            st = rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory decoding the JPEG");
        else
            st = rlx_error_set(err, RLX_ERR_FORMAT,
                               "the JPEG is corrupt or truncated (libjpeg: %s)", c->e.msg);
        free(c);
        return st;
    }
    uint8_t *buf = c->buf;
    int w = (int)c->w, h = (int)c->h;
    if (c->orientation != 1) {
        uint8_t *o = orient(buf, w, h, 3, c->orientation, &w, &h);
        free(buf);
        buf = o;
        if (!buf) {
            free(c);
            return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory decoding the JPEG");
        }
    }
    free(c);
    return image_from_buffer(buf, w, h, 3, out, err);
}

rlx_status rlx_image_decode(const void *data, size_t size, const rlx_image_load_params *params,
                            rlx_image **out, rlx_error **err)
{
    if (out)
        *out = NULL;
    if (!out || (!data && size))
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "rlx_image_decode needs data and an out");
    rlx_image_load_params p = params ? *params : rlx_image_load_default_params();
    if (p.max_pixels <= 0)
        p.max_pixels = RLX_IMAGE_DEFAULT_MAX_PIXELS;
    /* keeps width * height * 4 bytes far from size_t's end whatever is asked */
    if (p.max_pixels > RLX_IMAGE_MAX_PIXELS_LIMIT)
        p.max_pixels = RLX_IMAGE_MAX_PIXELS_LIMIT;
    if (size == 0)
        return rlx_error_set(err, RLX_ERR_FORMAT,
                             "the file is empty (0 bytes): it is not an image");
    const char *kind = rlx_image_sniff(data, size);
    if (kind && kind[0] == 'P')
        return decode_png(data, size, &p, out, err);
    if (kind && kind[0] == 'J')
        return decode_jpeg(data, size, &p, out, err);
    const char *other = other_format(data, size);
    if (other)
        return rlx_error_set(err, RLX_ERR_UNSUPPORTED,
                             "this is a %s image; RLX reads PNG and JPEG images only", other);
    return rlx_error_set(err, RLX_ERR_FORMAT, "this is not an image (neither PNG nor JPEG)");
}

rlx_status rlx_image_load(const char *path, const rlx_image_load_params *params, rlx_image **out,
                          rlx_error **err)
{
    if (out)
        *out = NULL;
    if (!path || !out)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "rlx_image_load needs a path and an out");
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return rlx_error_set(err, RLX_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return rlx_error_set(err, RLX_ERR_IO, "cannot read %s: %s", path, strerror(e));
    }
    if (S_ISDIR(st.st_mode)) {
        close(fd);
        return rlx_error_set(err, RLX_ERR_IO, "%s is a folder, not an image", path);
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return rlx_error_set(err, RLX_ERR_IO, "%s is not a regular file", path);
    }
    size_t n = (size_t)st.st_size;
    uint8_t *buf = malloc(n ? n : 1);
    if (!buf) {
        close(fd);
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory reading %s", path);
    }
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, buf + got, n - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            int e = errno;
            close(fd);
            free(buf);
            return rlx_error_set(err, RLX_ERR_IO, "cannot read %s: %s", path, strerror(e));
        }
        if (r == 0)
            break; /* shrank while we read: decode what is there */
        got += (size_t)r;
    }
    close(fd);
    rlx_status s = rlx_image_decode(buf, got, params, out, err);
    free(buf);
    if (s != RLX_OK)
        rlx_error_prefix(err, "%s: ", path);
    return s;
}

/* ---- Resampling ---------------------------------------------------------- */

/* Pillow's Resample.c, 8 bits a sample: coefficients in double, then 22-bit
 * fixed point rounded half away from zero; each output starts at half a unit
 * and is shifted down and clamped. */
#define PIL_PRECISION_BITS (32 - 8 - 2)

typedef struct coeffs {
    int ksize;
    int *bounds; /* [out] xmin, count */
    double *k;   /* [out][ksize] */
} coeffs;

static double triangle(double x)
{
    if (x < 0.0)
        x = -x;
    return x < 1.0 ? 1.0 - x : 0.0;
}

static bool pil_coeffs(int in_size, int out_size, coeffs *c)
{
    double scale = (double)(float)in_size / out_size; /* PIL's box edges are floats */
    double filterscale = scale < 1.0 ? 1.0 : scale;
    double support = 1.0 * filterscale; /* BILINEAR's support is 1 */
    c->ksize = (int)ceil(support) * 2 + 1;
    c->k = calloc((size_t)out_size * c->ksize, sizeof *c->k);
    c->bounds = malloc((size_t)out_size * 2 * sizeof *c->bounds);
    if (!c->k || !c->bounds)
        return false;
    for (int xx = 0; xx < out_size; xx++) {
        double center = (xx + 0.5) * scale;
        double ss = 1.0 / filterscale;
        int xmin = (int)(center - support + 0.5);
        if (xmin < 0)
            xmin = 0;
        int xmax = (int)(center + support + 0.5);
        if (xmax > in_size)
            xmax = in_size;
        xmax -= xmin;
        double *k = c->k + (size_t)xx * c->ksize, ww = 0.0;
        for (int x = 0; x < xmax; x++) {
            k[x] = triangle((x + xmin - center + 0.5) * ss);
            ww += k[x];
        }
        for (int x = 0; x < xmax; x++)
            if (ww != 0.0)
                k[x] /= ww;
        c->bounds[xx * 2] = xmin;
        c->bounds[xx * 2 + 1] = xmax;
    }
    return true;
}

static void coeffs_free(coeffs *c)
{
    free(c->k);
    free(c->bounds);
}

static int32_t *fixed_coeffs(const coeffs *c, int out_size)
{
    size_t n = (size_t)out_size * c->ksize;
    int32_t *kk = malloc(n * sizeof *kk);
    if (!kk)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        double v = c->k[i] * (1 << PIL_PRECISION_BITS);
        kk[i] = (int32_t)(c->k[i] < 0 ? v - 0.5 : v + 0.5);
    }
    return kk;
}

static inline uint8_t pil_clip8(int32_t v)
{
    if (v < 0)
        return 0;
    v >>= PIL_PRECISION_BITS;
    return (uint8_t)(v > 255 ? 255 : v);
}

rlx_status rlx_image_resize_pil_bilinear(const uint8_t *src, int sw, int sh, int channels,
                                         uint8_t *dst, int dw, int dh, rlx_error **err)
{
    if (!src || !dst || sw < 1 || sh < 1 || dw < 1 || dh < 1 || channels < 1 || channels > 4)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                             "rlx_image_resize_pil_bilinear needs two images of at least 1x1 "
                             "with 1 to 4 channels");
    int ch = channels;
    coeffs cv = {0}, chz = {0};
    int32_t *kv = NULL, *kh = NULL;
    uint8_t *tmp = NULL;
    rlx_status st = RLX_OK;
    if (!pil_coeffs(sh, dh, &cv) || !(kv = fixed_coeffs(&cv, dh))) {
        st = rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory resizing the image");
        goto done;
    }
    /* The horizontal pass only makes the rows the vertical pass reads. */
    int yfirst = cv.bounds[0];
    int ylast = cv.bounds[(dh - 1) * 2] + cv.bounds[(dh - 1) * 2 + 1];
    const uint8_t *vin = src;
    int vin_w = sw, yoff = 0;
    if (dw != sw) {
        if (!pil_coeffs(sw, dw, &chz) || !(kh = fixed_coeffs(&chz, dw)) ||
            !(tmp = malloc((size_t)dw * (ylast - yfirst) * ch))) {
            st = rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory resizing the image");
            goto done;
        }
        for (int y = yfirst; y < ylast; y++) {
            const uint8_t *row = src + (size_t)y * sw * ch;
            uint8_t *o = tmp + (size_t)(y - yfirst) * dw * ch;
            for (int xx = 0; xx < dw; xx++) {
                int xmin = chz.bounds[xx * 2], xn = chz.bounds[xx * 2 + 1];
                const int32_t *k = kh + (size_t)xx * chz.ksize;
                for (int c = 0; c < ch; c++) {
                    int32_t ss = 1 << (PIL_PRECISION_BITS - 1);
                    for (int x = 0; x < xn; x++)
                        ss += row[(size_t)(x + xmin) * ch + c] * k[x];
                    o[(size_t)xx * ch + c] = pil_clip8(ss);
                }
            }
        }
        vin = tmp;
        vin_w = dw;
        yoff = yfirst;
    }
    if (dh != sh) {
        for (int yy = 0; yy < dh; yy++) {
            int ymin = cv.bounds[yy * 2] - yoff, yn = cv.bounds[yy * 2 + 1];
            const int32_t *k = kv + (size_t)yy * cv.ksize;
            uint8_t *o = dst + (size_t)yy * dw * ch;
            for (int i = 0; i < vin_w * ch; i++) {
                int32_t ss = 1 << (PIL_PRECISION_BITS - 1);
                for (int y = 0; y < yn; y++)
                    ss += vin[(size_t)(y + ymin) * vin_w * ch + i] * k[y];
                o[i] = pil_clip8(ss);
            }
        }
    } else {
        /* no vertical pass: the horizontal result (all rows) or a copy */
        memcpy(dst, vin, (size_t)dw * dh * ch);
    }
done:
    coeffs_free(&cv);
    coeffs_free(&chz);
    free(kv);
    free(kh);
    free(tmp);
    return st;
}

/* torch's antialiased bilinear (_upsample_bilinear2d_aa) weights for one
 * axis, with its float/double mix: float scale, center and weights, double
 * intermediate products where C++ promotes. */
typedef struct aa_axis {
    int ksize;
    int *xmin, *xn;
    float *w; /* [out][ksize] */
} aa_axis;

static void aa_free(aa_axis *a)
{
    free(a->xmin);
    free(a->xn);
    free(a->w);
}

static bool aa_weights(int in_size, int out_size, aa_axis *a)
{
    float scale = (float)in_size / (float)out_size;
    float support = scale >= 1.0f ? 1.0f * scale : 1.0f;
    a->ksize = (int)ceil(support) * 2 + 1;
    a->xmin = malloc((size_t)out_size * sizeof *a->xmin);
    a->xn = malloc((size_t)out_size * sizeof *a->xn);
    a->w = calloc((size_t)out_size * a->ksize, sizeof *a->w);
    if (!a->xmin || !a->xn || !a->w)
        return false;
    for (int i = 0; i < out_size; i++) {
        float center = (float)(scale * (i + 0.5));
        float invscale = scale >= 1.0f ? (float)(1.0 / scale) : 1.0f;
        int64_t xmin = (int64_t)(center - support + 0.5);
        if (xmin < 0)
            xmin = 0;
        int64_t xmax = (int64_t)(center + support + 0.5);
        if (xmax > in_size)
            xmax = in_size;
        int xn = (int)(xmax - xmin);
        if (xn > a->ksize)
            xn = a->ksize;
        float *w = a->w + (size_t)i * a->ksize, total = 0.0f;
        for (int j = 0; j < xn; j++) {
            /* (j + xmin - center + 0.5) * invscale: float, then double, then the
             * filter's float argument */
            double arg = ((double)((float)(j + xmin) - center) + 0.5) * invscale;
            w[j] = (float)triangle((double)(float)arg);
            total += w[j];
        }
        for (int j = 0; j < xn; j++)
            if (total != 0.0f)
                w[j] /= total;
        a->xmin[i] = (int)xmin;
        a->xn[i] = xn;
    }
    return true;
}

/* Float antialiased resize of planar CHW data: width first, then height. */
static rlx_status resize_float_aa(const float *src, int sw, int sh, float *dst, int dw, int dh,
                                  rlx_error **err)
{
    aa_axis ax = {0}, ay = {0};
    float *tmp = NULL;
    rlx_status st = RLX_OK;
    if (!aa_weights(sw, dw, &ax) || !aa_weights(sh, dh, &ay) ||
        !(tmp = malloc((size_t)dw * sh * sizeof *tmp))) {
        st = rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory resizing the image");
        goto done;
    }
    for (int y = 0; y < sh; y++) {
        const float *row = src + (size_t)y * sw;
        for (int x = 0; x < dw; x++) {
            const float *w = ax.w + (size_t)x * ax.ksize;
            const float *s = row + ax.xmin[x];
            float t = s[0] * w[0];
            for (int j = 1; j < ax.xn[x]; j++)
                t += s[j] * w[j];
            tmp[(size_t)y * dw + x] = t;
        }
    }
    for (int y = 0; y < dh; y++) {
        const float *w = ay.w + (size_t)y * ay.ksize;
        for (int x = 0; x < dw; x++) {
            const float *s = tmp + (size_t)ay.xmin[y] * dw + x;
            float t = s[0] * w[0];
            for (int j = 1; j < ay.xn[y]; j++)
                t += s[(size_t)j * dw] * w[j];
            dst[(size_t)y * dw + x] = t;
        }
    }
done:
    aa_free(&ax);
    aa_free(&ay);
    free(tmp);
    return st;
}

/* torch's upsample_bilinear2d (align_corners=False) source index and weights
 * along one axis, in float as its CPU kernel for float tensors. Only the first
 * `count` outputs of an out_size-long axis are made (SAM crops after the
 * first upsampling, so the rows and columns cut away are never computed). */
typedef struct lin_axis {
    int *i0, *i1;
    float *l0, *l1;
} lin_axis;

static void lin_free(lin_axis *a)
{
    free(a->i0);
    free(a->i1);
    free(a->l0);
    free(a->l1);
}

static bool lin_weights(int in_size, int out_size, int count, lin_axis *a)
{
    a->i0 = malloc((size_t)count * sizeof *a->i0);
    a->i1 = malloc((size_t)count * sizeof *a->i1);
    a->l0 = malloc((size_t)count * sizeof *a->l0);
    a->l1 = malloc((size_t)count * sizeof *a->l1);
    if (!a->i0 || !a->i1 || !a->l0 || !a->l1)
        return false;
    float scale = (float)in_size / (float)out_size;
    for (int i = 0; i < count; i++) {
        float real = (float)(scale * (i + 0.5) - 0.5);
        if (real < 0.0f)
            real = 0.0f;
        int i0 = (int)real;
        if (i0 > in_size - 1)
            i0 = in_size - 1;
        float l1 = real - (float)i0;
        l1 = l1 < 0.0f ? 0.0f : l1 > 1.0f ? 1.0f : l1;
        a->i0[i] = i0;
        a->i1[i] = i0 + (i0 < in_size - 1 ? 1 : 0);
        a->l1[i] = l1;
        a->l0[i] = 1.0f - l1;
    }
    return true;
}

/* Separable: each source row the output needs is resampled along x once
 * (two kept, as consecutive output rows share them), then each output row
 * is a blend of two of those; the same sums as the 2-D form, in the order
 * h0 * (row a) + h1 * (row b). The same size in and out is a copy. */
static rlx_status interp_region(const float *src, int sw, int sh, float *dst, int dw, int dh,
                                int cw, int chh, rlx_error **err)
{
    if (sw == dw && sh == dh && cw == sw && chh == sh) {
        memcpy(dst, src, (size_t)sw * (size_t)sh * sizeof *dst);
        return RLX_OK;
    }
    lin_axis ax = {0}, ay = {0};
    rlx_status st = RLX_OK;
    float *rows = malloc(2 * (size_t)cw * sizeof *rows);
    if (!rows || !lin_weights(sw, dw, cw, &ax) || !lin_weights(sh, dh, chh, &ay)) {
        st = rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory upsampling the mask");
        goto done;
    }
    int have[2] = {-1, -1}; /* the source row held by rows[k * cw] */
    for (int y = 0; y < chh; y++) {
        const int want[2] = {ay.i0[y], ay.i1[y]};
        const float *r[2];
        for (int k = 0; k < 2; k++) {
            int slot = have[0] == want[k] ? 0 : have[1] == want[k] ? 1 : -1;
            if (slot < 0) { /* fill the slot that does not hold the other row */
                slot = have[0] == want[1 - k] ? 1 : 0;
                float *o = rows + (size_t)slot * cw;
                const float *sr = src + (size_t)want[k] * sw;
                for (int x = 0; x < cw; x++)
                    o[x] = ax.l0[x] * sr[ax.i0[x]] + ax.l1[x] * sr[ax.i1[x]];
                have[slot] = want[k];
            }
            r[k] = rows + (size_t)slot * cw;
        }
        const float h0 = ay.l0[y], h1 = ay.l1[y], *a = r[0], *b = r[1];
        float *o = dst + (size_t)y * cw;
        for (int x = 0; x < cw; x++)
            o[x] = h0 * a[x] + h1 * b[x];
    }
done:
    free(rows);
    lin_free(&ax);
    lin_free(&ay);
    return st;
}

rlx_status rlx_image_resize_bilinear_topleft(const uint8_t *src, int sw, int sh, int channels,
                                             uint8_t *dst, int dw, int dh, rlx_error **err)
{
    if (!src || !dst || sw < 1 || sh < 1 || dw < 1 || dh < 1 || channels < 1 || channels > 4)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                             "rlx_image_resize_bilinear_topleft needs two images of at least 1x1 "
                             "with 1 to 4 channels");
    const int ch = channels;
    /* The arithmetic is the JavaScript's, in its order and in double, so
     * that the rounding to uint8 lands where it lands there. */
    const double scale_x = (double)sw / (double)dw, scale_y = (double)sh / (double)dh;
    for (int y = 0; y < dh; y++) {
        double sy = y * scale_y;
        int y1 = (int)floor(sy), y2 = (int)ceil(sy);
        if (y1 < 0)
            y1 = 0;
        if (y2 > sh - 1)
            y2 = sh - 1;
        double dy = sy - y1;
        const uint8_t *r1 = src + (size_t)y1 * sw * ch, *r2 = src + (size_t)y2 * sw * ch;
        uint8_t *o = dst + (size_t)y * dw * ch;
        for (int x = 0; x < dw; x++) {
            double sx = x * scale_x;
            int x1 = (int)floor(sx), x2 = (int)ceil(sx);
            if (x1 < 0)
                x1 = 0;
            if (x2 > sw - 1)
                x2 = sw - 1;
            double dx = sx - x1;
            for (int c = 0; c < ch; c++) {
                double p1 = r1[(size_t)x1 * ch + c], p2 = r1[(size_t)x2 * ch + c];
                double p3 = r2[(size_t)x1 * ch + c], p4 = r2[(size_t)x2 * ch + c];
                double v = (1 - dx) * (1 - dy) * p1 + dx * (1 - dy) * p2 + (1 - dx) * dy * p3 +
                           dx * dy * p4;
                /* Math.round: halves go up */
                double r = floor(v);
                if (v - r >= 0.5)
                    r += 1;
                o[(size_t)x * ch + c] = (uint8_t)(r < 0 ? 0 : r > 255 ? 255 : r);
            }
        }
    }
    return RLX_OK;
}

rlx_status rlx_image_interpolate_bilinear(const float *src, int sw, int sh, float *dst, int dw,
                                          int dh, rlx_error **err)
{
    if (!src || !dst || sw < 1 || sh < 1 || dw < 1 || dh < 1)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                             "rlx_image_interpolate_bilinear needs two planes of at least 1x1");
    return interp_region(src, sw, sh, dst, dw, dh, dw, dh, err);
}

/* ---- Preprocessing -------------------------------------------------------- */

rlx_image_prep_params rlx_image_prep_sam_params(void)
{
    return (rlx_image_prep_params){
        .target = 1024,
        .fit = RLX_IMAGE_FIT_LONGEST_PAD,
        .resample = RLX_IMAGE_RESAMPLE_PIL_U8,
        .divisor = 1.0f,
        .mean = {123.675f, 116.28f, 103.53f},
        .std = {58.395f, 57.12f, 57.375f},
    };
}

rlx_image_prep_params rlx_image_prep_sam2_params(void)
{
    return (rlx_image_prep_params){
        .target = 1024,
        .fit = RLX_IMAGE_FIT_STRETCH,
        .resample = RLX_IMAGE_RESAMPLE_FLOAT_AA,
        .divisor = 255.0f,
        .mean = {0.485f, 0.456f, 0.406f},
        .std = {0.229f, 0.224f, 0.225f},
    };
}

size_t rlx_image_prep_floats(const rlx_image_prep_params *p)
{
    if (!p || p->target < 1 || p->target > MAX_TARGET)
        return 0;
    return (size_t)3 * p->target * p->target;
}

void rlx_image_longest_side_shape(int width, int height, int target, int *out_width,
                                  int *out_height)
{
    int longest = width > height ? width : height;
    double scale = target * 1.0 / (longest > 0 ? longest : 1);
    int w = (int)(width * scale + 0.5), h = (int)(height * scale + 0.5);
    /* a 1 x 4000 strip still keeps one row */
    *out_width = w < 1 ? 1 : w;
    *out_height = h < 1 ? 1 : h;
}

static rlx_status check_prep(const rlx_image_prep_params *p, rlx_error **err)
{
    if (!p || p->target < 1 || p->target > MAX_TARGET)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                             "the model's input size must be between 1 and %d pixels", MAX_TARGET);
    if (!(p->divisor > 0.0f) || !(p->std[0] != 0.0f && p->std[1] != 0.0f && p->std[2] != 0.0f))
        return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                             "the preprocessing needs a positive divisor and non-zero std");
    if (p->fit != RLX_IMAGE_FIT_LONGEST_PAD && p->fit != RLX_IMAGE_FIT_STRETCH)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "unknown image fit %d", (int)p->fit);
    if (p->resample != RLX_IMAGE_RESAMPLE_PIL_U8 && p->resample != RLX_IMAGE_RESAMPLE_FLOAT_AA)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "unknown resampling %d", (int)p->resample);
    return RLX_OK;
}

static void resized_shape(const rlx_image_prep_params *p, int w, int h, int *rw, int *rh)
{
    if (p->fit == RLX_IMAGE_FIT_STRETCH) {
        *rw = *rh = p->target;
    } else {
        rlx_image_longest_side_shape(w, h, p->target, rw, rh);
    }
}

rlx_status rlx_image_preprocess(const rlx_image *img, const rlx_image_prep_params *p, float *dst,
                                rlx_image_prep_info *info, rlx_error **err)
{
    if (!img || !img->rgb || !dst || img->width < 1 || img->height < 1)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                             "rlx_image_preprocess needs an image of at least 1x1 and a tensor");
    rlx_status st = check_prep(p, err);
    if (st != RLX_OK)
        return st;
    int T = p->target, rw, rh;
    resized_shape(p, img->width, img->height, &rw, &rh);
    size_t plane = (size_t)T * T, n = (size_t)img->width * img->height;
    memset(dst, 0, 3 * plane * sizeof *dst);
    if (p->resample == RLX_IMAGE_RESAMPLE_PIL_U8) {
        uint8_t *r = malloc((size_t)rw * rh * 3);
        if (!r)
            return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory preprocessing the image");
        st = rlx_image_resize_pil_bilinear(img->rgb, img->width, img->height, 3, r, rw, rh, err);
        if (st == RLX_OK) {
            for (int c = 0; c < 3; c++)
                for (int y = 0; y < rh; y++)
                    for (int x = 0; x < rw; x++) {
                        float v = (float)r[((size_t)y * rw + x) * 3 + c] / p->divisor;
                        dst[c * plane + (size_t)y * T + x] = (v - p->mean[c]) / p->std[c];
                    }
        }
        free(r);
    } else {
        float *in = malloc(n * sizeof *in), *out = malloc((size_t)rw * rh * sizeof *out);
        if (!in || !out) {
            free(in);
            free(out);
            return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory preprocessing the image");
        }
        for (int c = 0; c < 3 && st == RLX_OK; c++) {
            for (size_t i = 0; i < n; i++)
                in[i] = (float)img->rgb[i * 3 + c] / p->divisor;
            st = resize_float_aa(in, img->width, img->height, out, rw, rh, err);
            for (int y = 0; st == RLX_OK && y < rh; y++)
                for (int x = 0; x < rw; x++)
                    dst[c * plane + (size_t)y * T + x] =
                        (out[(size_t)y * rw + x] - p->mean[c]) / p->std[c];
        }
        free(in);
        free(out);
    }
    if (st == RLX_OK && info)
        *info = (rlx_image_prep_info){img->width, img->height, rw, rh};
    return st;
}

rlx_status rlx_image_mask_upsample(const float *lowres, int lw, int lh,
                                   const rlx_image_prep_params *p, const rlx_image_prep_info *info,
                                   float threshold, float *logits, uint8_t *mask, rlx_error **err)
{
    if (!lowres || !info || lw < 1 || lh < 1 || info->orig_width < 1 || info->orig_height < 1 ||
        info->resized_width < 1 || info->resized_height < 1)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                             "rlx_image_mask_upsample needs the low-resolution mask and the "
                             "preprocessing's sizes");
    rlx_status st = check_prep(p, err);
    if (st != RLX_OK)
        return st;
    int T = p->target, ow = info->orig_width, oh = info->orig_height;
    int rw = info->resized_width, rh = info->resized_height;
    if (rw > T || rh > T)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                             "the resized image (%dx%d) is larger than the model's input (%d)", rw,
                             rh, T);
    size_t n = (size_t)ow * oh;
    float *out = logits ? logits : malloc(n * sizeof *out);
    float *mid = NULL;
    if (!out)
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory upsampling the mask");
    if (p->fit == RLX_IMAGE_FIT_LONGEST_PAD) {
        mid = malloc((size_t)rw * rh * sizeof *mid);
        if (!mid)
            st = rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory upsampling the mask");
        if (st == RLX_OK)
            st = interp_region(lowres, lw, lh, mid, T, T, rw, rh, err);
        if (st == RLX_OK)
            st = interp_region(mid, rw, rh, out, ow, oh, ow, oh, err);
    } else {
        st = interp_region(lowres, lw, lh, out, ow, oh, ow, oh, err);
    }
    if (st == RLX_OK && mask)
        for (size_t i = 0; i < n; i++)
            mask[i] = out[i] > threshold ? 255 : 0;
    free(mid);
    if (out != logits)
        free(out);
    return st;
}

/* ---- PNG writing ---------------------------------------------------------- */

typedef struct png_wctx {
    FILE *f;
    const uint8_t *pixels;
    int w, h, channels;
    const char *key, *value; /* one text chunk, or key NULL */
    char msg[256];
} png_wctx;

/* Whether s is all ASCII: then a tEXt chunk (Latin-1) carries it unchanged;
 * other UTF-8 goes into an iTXt chunk, which is UTF-8 by definition. */
static bool all_ascii(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s >= 0x80)
            return false;
    return true;
}

static int png_write_run(png_wctx *c, png_structp png, png_infop info)
{
    if (setjmp(png_jmpbuf(png)))
        return -1;
    static const int types[5] = {0, PNG_COLOR_TYPE_GRAY, PNG_COLOR_TYPE_GRAY_ALPHA,
                                 PNG_COLOR_TYPE_RGB, PNG_COLOR_TYPE_RGB_ALPHA};
    png_init_io(png, c->f);
    png_set_IHDR(png, info, (png_uint_32)c->w, (png_uint_32)c->h, 8, types[c->channels],
                 PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    if (c->key) {
        png_text t = {0};
        t.key = (png_charp)c->key;
        t.text = (png_charp)c->value;
        t.text_length = strlen(c->value);
#ifdef PNG_iTXt_SUPPORTED
        if (!all_ascii(c->value)) {
            t.compression = PNG_ITXT_COMPRESSION_NONE;
            t.itxt_length = t.text_length;
            t.text_length = 0;
        } else
#endif
            t.compression = PNG_TEXT_COMPRESSION_NONE;
        png_set_text(png, info, &t, 1);
    }
    png_write_info(png, info);
    for (int y = 0; y < c->h; y++)
        png_write_row(png, (png_const_bytep)(c->pixels + (size_t)y * c->w * c->channels));
    png_write_end(png, NULL);
    return 0;
}

static void png_werror(png_structp png, png_const_charp msg)
{
    png_wctx *c = png_get_error_ptr(png);
    if (c && !c->msg[0])
        snprintf(c->msg, sizeof c->msg, "%s", msg);
    png_longjmp(png, 1);
}

/* Moves tmp to path; without overwrite, atomically refuses an existing path. */
static rlx_status commit_file(const char *tmp, const char *path, bool overwrite, rlx_error **err)
{
    if (overwrite) {
        if (rename(tmp, path) != 0)
            return rlx_error_set(err, RLX_ERR_IO, "cannot write %s: %s", path, strerror(errno));
        return RLX_OK;
    }
    if (renameat2(AT_FDCWD, tmp, AT_FDCWD, path, RENAME_NOREPLACE) == 0)
        return RLX_OK;
    if (errno == EEXIST)
        return rlx_error_set(err, RLX_ERR_IO,
                             "%s exists; choose another name or allow replacing it", path);
    if (errno != EINVAL && errno != ENOSYS)
        return rlx_error_set(err, RLX_ERR_IO, "cannot write %s: %s", path, strerror(errno));
    /* a file system without RENAME_NOREPLACE: a hard link fails on an existing name */
    if (link(tmp, path) == 0) {
        unlink(tmp);
        return RLX_OK;
    }
    if (errno == EEXIST)
        return rlx_error_set(err, RLX_ERR_IO,
                             "%s exists; choose another name or allow replacing it", path);
    struct stat st;
    if (stat(path, &st) == 0)
        return rlx_error_set(err, RLX_ERR_IO,
                             "%s exists; choose another name or allow replacing it", path);
    if (rename(tmp, path) != 0)
        return rlx_error_set(err, RLX_ERR_IO, "cannot write %s: %s", path, strerror(errno));
    return RLX_OK;
}

static rlx_status write_png(const char *path, const uint8_t *pixels, int width, int height,
                            int channels, const char *key, const char *value, bool overwrite,
                            rlx_error **err)
{
    if (!path || !*path || !pixels || width < 1 || height < 1 || channels < 1 || channels > 4)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                             "rlx_image_write_png needs a path and an image of at least 1x1 with "
                             "1 to 4 channels");
    if ((uint64_t)width > PNG_UINT_31_MAX || (uint64_t)height > PNG_UINT_31_MAX)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "the image is too large for a PNG");
    struct stat sb;
    if (!overwrite && stat(path, &sb) == 0)
        return rlx_error_set(err, RLX_ERR_IO,
                             "%s exists; choose another name or allow replacing it", path);
    size_t n = strlen(path);
    char *tmp = malloc(n + 16);
    if (!tmp)
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
    snprintf(tmp, n + 16, "%s.tmp-XXXXXX", path);
    int fd = mkstemp(tmp);
    if (fd < 0) {
        rlx_status s = rlx_error_set(err, RLX_ERR_IO, "cannot write %s: %s", path, strerror(errno));
        free(tmp);
        return s;
    }
    fchmod(fd, 0644); /* mkstemp's 0600 would make a private image */
    png_wctx c = {.pixels = pixels,
                  .w = width,
                  .h = height,
                  .channels = channels,
                  .key = key,
                  .value = value};
    c.f = fdopen(fd, "wb");
    rlx_status st = RLX_OK;
    if (!c.f) {
        close(fd);
        st = rlx_error_set(err, RLX_ERR_IO, "cannot write %s: %s", path, strerror(errno));
    } else {
        png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &c, png_werror, NULL);
        png_infop info = png ? png_create_info_struct(png) : NULL;
        if (!png || !info)
            st = rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory writing %s", path);
        else if (png_write_run(&c, png, info) != 0)
            st = rlx_error_set(err, RLX_ERR_IO, "cannot write %s: %s", path, c.msg);
        png_destroy_write_struct(&png, &info);
        if (st == RLX_OK && (fflush(c.f) != 0 || ferror(c.f)))
            st = rlx_error_set(err, RLX_ERR_IO, "cannot write %s: %s", path, strerror(errno));
        if (fclose(c.f) != 0 && st == RLX_OK)
            st = rlx_error_set(err, RLX_ERR_IO, "cannot write %s: %s", path, strerror(errno));
    }
    if (st == RLX_OK)
        st = commit_file(tmp, path, overwrite, err);
    if (st != RLX_OK)
        unlink(tmp); /* an existing file at path stays as it was */
    free(tmp);
    return st;
}

rlx_status rlx_image_write_png(const char *path, const uint8_t *pixels, int width, int height,
                               int channels, bool overwrite, rlx_error **err)
{
    return write_png(path, pixels, width, height, channels, NULL, NULL, overwrite, err);
}

rlx_status rlx_image_write_png_text(const char *path, const uint8_t *pixels, int width, int height,
                                    int channels, const char *key, const char *value,
                                    bool overwrite, rlx_error **err)
{
    /* PNG keywords: 1 to 79 printable Latin-1 characters, no leading,
     * trailing or double spaces; ASCII here, which every reader takes */
    size_t kn = key ? strlen(key) : 0;
    bool ok = kn >= 1 && kn <= 79 && key[0] != ' ' && key[kn - 1] != ' ' && !strstr(key, "  ");
    for (size_t i = 0; ok && i < kn; i++)
        ok = key[i] >= 32 && key[i] <= 126;
    if (!ok)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                             "a PNG text keyword is 1 to 79 printable ASCII characters without "
                             "leading, trailing or double spaces");
    if (!value)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "the PNG text for \"%s\" is missing", key);
    return write_png(path, pixels, width, height, channels, key, value, overwrite, err);
}

rlx_status rlx_image_write_mask_png(const char *path, const uint8_t *mask, int width, int height,
                                    bool overwrite, rlx_error **err)
{
    return rlx_image_write_png(path, mask, width, height, 1, overwrite, err);
}

rlx_status rlx_image_write_cutout_png(const char *path, const rlx_image *img, const uint8_t *mask,
                                      bool overwrite, rlx_error **err)
{
    if (!img || !img->rgb || !mask || img->width < 1 || img->height < 1)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                             "rlx_image_write_cutout_png needs an image and its mask");
    size_t n = (size_t)img->width * img->height;
    uint8_t *rgba = malloc(n * 4);
    if (!rgba)
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory writing %s",
                             path ? path : "the cut-out");
    for (size_t i = 0; i < n; i++) {
        memcpy(rgba + i * 4, img->rgb + i * 3, 3);
        rgba[i * 4 + 3] = mask[i];
    }
    rlx_status st = rlx_image_write_png(path, rgba, img->width, img->height, 4, overwrite, err);
    free(rgba);
    return st;
}
